// The run page: the run's records come from /api/run/<folder> and are drawn and written as text;
// ArrowLeft/ArrowRight/Home/End (or the buttons) step through them.
"use strict";

// ARC-AGI-3's 16 colours, as the official toolkit (arc_agi.rendering.COLOR_MAP) draws them; a
// colour outside 0-15 is drawn black, as the toolkit draws it.
const PALETTE = [
  "#ffffff", "#cccccc", "#999999", "#666666", "#333333", "#000000", "#e53aa3", "#ff7bcc",
  "#f93c31", "#1e93ff", "#88d8f1", "#ffdc00", "#ff851b", "#921231", "#4fcc30", "#a356d6",
];
const OUTSIDE = "#000000";
const folder = decodeURIComponent(location.pathname.split("/")[2] || "");
let run = null;
let index = 0;
let frameIndex = 0;

function byId(id) {
  return document.getElementById(id);
}

function colours(row) {
  return typeof row === "string" ? Array.from(row, (digit) => parseInt(digit, 16)) : row;
}

function draw(canvas, frame, mark) {
  const context = canvas.getContext("2d");
  const cell = canvas.width / 64;
  context.fillStyle = OUTSIDE;
  context.fillRect(0, 0, canvas.width, canvas.height);
  frame.forEach((row, y) => {
    colours(row).forEach((colour, x) => {
      context.fillStyle = Number.isInteger(colour) && colour >= 0 && colour < 16 ? PALETTE[colour] : OUTSIDE;
      context.fillRect(x * cell, y * cell, cell, cell);
    });
  });
  if (mark) {
    context.lineWidth = 2;
    context.strokeStyle = "#000000";
    context.strokeRect(mark.x * cell - 2, mark.y * cell - 2, cell + 4, cell + 4);
    context.strokeStyle = "#ffffff";
    context.strokeRect(mark.x * cell - 4, mark.y * cell - 4, cell + 8, cell + 8);
  }
}

function actionText(action) {
  if (!action || typeof action !== "object") return String(action);
  const at = action.x !== null && action.x !== undefined ? ` at x=${action.x}, y=${action.y}` : "";
  return `${action.name}${at}`;
}

function usageText(usage) {
  if (!usage) return "-";
  return `input ${usage.input_tokens} (cached ${usage.cache_read_tokens}), output ${usage.output_tokens} ` +
    `(reasoning ${usage.reasoning_tokens}), ${usage.requests} request(s)`;
}

function listOf(list, lines) {
  list.replaceChildren();
  for (const line of lines) {
    const item = document.createElement("li");
    item.textContent = line;
    list.appendChild(item);
  }
}

function showFrame(step) {
  const frames = step.observation ? step.observation.frames : [];
  const canvas = byId("frame");
  canvas.dataset.step = String(step.step);
  if (!frames.length) {
    canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
    canvas.dataset.digest = "";
    byId("frame-caption").textContent = "this step's record holds no frame";
    return;
  }
  const action = step.action || {};
  const mark = Number.isInteger(action.x) && Number.isInteger(action.y) ? action : null;
  draw(canvas, frames[frameIndex], mark);
  canvas.dataset.digest = step.observation.digests[frameIndex];
  canvas.dataset.frame = String(frameIndex + 1);
  byId("frame-caption").textContent = `frame ${frameIndex + 1} of ${frames.length} shown to the model`;
  for (const [number, thumbnail] of byId("thumbnails").querySelectorAll("canvas").entries()) {
    thumbnail.classList.toggle("shown", number === frameIndex);
  }
}

function show(next) {
  const steps = run.steps;
  if (!steps.length) return;
  index = Math.max(0, Math.min(steps.length - 1, next));
  const step = steps[index];
  const frames = step.observation ? step.observation.frames : [];
  frameIndex = Math.max(frames.length - 1, 0);
  const thumbnails = byId("thumbnails");
  thumbnails.replaceChildren();
  if (frames.length > 1) {
    frames.forEach((frame, number) => {
      const thumbnail = document.createElement("canvas");
      thumbnail.width = thumbnail.height = 128;
      thumbnail.title = `frame ${number + 1}`;
      draw(thumbnail, frame, null);
      thumbnail.addEventListener("click", () => {
        frameIndex = number;
        showFrame(step);
      });
      thumbnails.appendChild(thumbnail);
    });
  }
  showFrame(step);
  byId("position").textContent = `step ${step.step} of ${steps.length}`;
  byId("action").textContent = actionText(step.action);
  const seen = step.observation;
  byId("observation").textContent = seen
    ? `${seen.state}, levels ${seen.levels_completed} of ${seen.win_levels}; offered ${seen.available_actions.join(", ")}`
    : "";
  byId("reasoning").textContent = step.reasoning_summary ?? "(none)";
  byId("answer").textContent = step.response ?? "";
  byId("usage").textContent = usageText(step.usage);
  byId("cost").textContent = step.estimated_cost === null || step.estimated_cost === undefined
    ? "estimated cost: -" : `estimated cost: $${step.estimated_cost.toFixed(6)}`;
  listOf(byId("retries"), step.retries.length
    ? step.retries.map((retry) => `attempt ${retry.attempt}: ${retry.kind}`)
    : ["none"]);
  const link = byId("step-json");
  link.href = step.file ? `/run/${encodeURIComponent(folder)}/${step.file}` : "#";
  const compaction = run.compactions.find((point) => point.step_before === step.step - 1);
  byId("compaction").hidden = !compaction;
  if (compaction) {
    byId("compaction-head").textContent =
      `compaction ${compaction.number} (${compaction.trigger ?? "-"}) after step ${compaction.step_before}`;
    byId("compaction-summary").textContent = compaction.summary ?? "(native compaction: no readable summary)";
  }
}

function summary(figures) {
  if (!figures) return "a run that never ended (no run_meta.json)";
  const score = figures.score === null ? "-" : figures.score.toFixed(2);
  const cost = figures.cost === null ? "-" : `$${figures.cost.toFixed(4)}`;
  return `${figures.exit_reason}, levels ${figures.levels_completed} of ${figures.win_levels}, ` +
    `${figures.actions} actions, score ${score}, cost ${cost}, started ${figures.started_at}`;
}

function showCompactions() {
  if (!run.compactions.length) return;
  byId("compactions").hidden = false;
  const list = byId("compaction-list");
  for (const point of run.compactions) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `after step ${point.step_before}`;
    button.addEventListener("click", () => show(run.steps.findIndex((s) => s.step === point.step_before + 1)));
    item.appendChild(button);
    item.appendChild(document.createTextNode(` ${point.summary ?? "(native compaction)"}`));
    list.appendChild(item);
  }
}

async function start() {
  const answer = await fetch(`/api/run/${encodeURIComponent(folder)}`);
  run = await answer.json();
  const figures = run.run;
  byId("title").textContent = figures ? `${figures.game} with ${figures.config}` : run.folder;
  byId("summary").textContent = summary(figures);
  listOf(byId("skipped-lines"), run.skipped);
  byId("skipped").hidden = !run.skipped.length;
  showCompactions();
  byId("first").addEventListener("click", () => show(0));
  byId("previous").addEventListener("click", () => show(index - 1));
  byId("next").addEventListener("click", () => show(index + 1));
  byId("last").addEventListener("click", () => show(run.steps.length - 1));
  document.addEventListener("keydown", (event) => {
    const moves = { ArrowLeft: index - 1, ArrowRight: index + 1, Home: 0, End: run.steps.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      show(moves[event.key]);
    }
  });
  if (!run.steps.length) byId("position").textContent = "no step record";
  show(0);
  document.body.dataset.ready = "true";
}

start();

// The runs page: the rows come from /api/runs and go in as text; a header sorts, the selects filter.
"use strict";

const COLUMNS = ["game", "config", "exit", "levels", "actions", "score", "tokens", "cost", "started"];
let runs = [];
let sortKey = "started";
let ascending = true;

function shown(run, key) {
  const value = run[key];
  if (value === null || value === undefined) return "-";
  if (key === "levels") return `${value}/${run.win_levels}`;
  if (key === "cost") return `$${value.toFixed(4)}`;
  if (key === "score") return value.toFixed(2);
  if (key === "tokens" || key === "actions") return value.toLocaleString("en");
  if (key === "started") return `${value.slice(0, 10)} ${value.slice(11, 19)}`;
  return String(value);
}

function compared(a, b) {
  const x = a[sortKey];
  const y = b[sortKey];
  if (x === y) return 0;
  if (x === null || x === undefined) return 1;
  if (y === null || y === undefined) return -1;
  const order = x < y ? -1 : 1;
  return ascending ? order : -order;
}

function fillSelect(select, values) {
  for (const value of values) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value;
    select.appendChild(option);
  }
}

function render() {
  const config = document.getElementById("filter-config").value;
  const game = document.getElementById("filter-game").value;
  const chosen = runs
    .filter((run) => (!config || run.config === config) && (!game || run.game === game))
    .sort(compared);
  const body = document.querySelector("#runs tbody");
  body.replaceChildren();
  for (const run of chosen) {
    const row = document.createElement("tr");
    row.dataset.folder = run.folder;
    for (const key of COLUMNS) {
      const cell = document.createElement("td");
      if (key === "game") {
        const link = document.createElement("a");
        link.href = `/run/${encodeURIComponent(run.folder)}`;
        link.textContent = run.game;
        link.title = run.folder;
        cell.appendChild(link);
      } else {
        cell.textContent = shown(run, key);
      }
      row.appendChild(cell);
    }
    body.appendChild(row);
  }
  document.getElementById("count").textContent = `${chosen.length} of ${runs.length} runs`;
  for (const header of document.querySelectorAll("#runs th")) {
    header.classList.toggle("sorted-ascending", header.dataset.key === sortKey && ascending);
    header.classList.toggle("sorted-descending", header.dataset.key === sortKey && !ascending);
  }
}

function showSweep(sweep) {
  if (!sweep) return;
  document.getElementById("sweep").hidden = false;
  document.getElementById("sweep-text").textContent =
    `configs: ${sweep.configs.join(", ")}; games: ${sweep.games.join(", ")}; ` +
    `${sweep.ended} of ${sweep.pairs} pairs ended`;
}

function showSkipped(lines) {
  if (!lines.length) return;
  document.getElementById("skipped").hidden = false;
  const list = document.getElementById("skipped-lines");
  for (const line of lines) {
    const item = document.createElement("li");
    item.textContent = line;
    list.appendChild(item);
  }
}

async function start() {
  const answer = await fetch("/api/runs");
  const data = await answer.json();
  runs = data.runs;
  fillSelect(document.getElementById("filter-config"), [...new Set(runs.map((r) => r.config))].sort());
  fillSelect(document.getElementById("filter-game"), [...new Set(runs.map((r) => r.game))].sort());
  showSweep(data.sweep);
  showSkipped(data.skipped);
  for (const header of document.querySelectorAll("#runs th")) {
    header.addEventListener("click", () => {
      ascending = header.dataset.key === sortKey ? !ascending : true;
      sortKey = header.dataset.key;
      render();
    });
  }
  for (const id of ["filter-config", "filter-game"]) {
    document.getElementById(id).addEventListener("change", render);
  }
  render();
  document.body.dataset.ready = "true";
}

start();

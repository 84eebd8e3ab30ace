"""The calendar days and months a question names ("on 7 July, 2023", "in August 2023").

A question that names a date is usually about what was said on or around it, so passage search
also considers the messages stored in that period. Days win over months: a question naming
both is about the day. A period at the calendar's edge ends at its last instant; a year 0000
names nothing.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(\d{4})"
DAY_MONTH_YEAR = re.compile(rf"\b{_DAY} (?:of )?{_MONTH},? {_YEAR}\b", re.IGNORECASE)
MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH} {_DAY},? {_YEAR}\b", re.IGNORECASE)
ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
MONTH_YEAR = re.compile(rf"\b{_MONTH},? {_YEAR}\b", re.IGNORECASE)

EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)

Period = tuple[datetime, datetime]


def shifted(moment: datetime, delta: timedelta) -> datetime:
    """`moment + delta`, held to the calendar's first and last instants."""
    try:
        return moment + delta
    except OverflowError:
        return LATEST if delta > timedelta(0) else EARLIEST


def _day(year: str, month: int, day: str) -> Period | None:
    try:
        start = datetime.combine(date(int(year), month, int(day)), datetime.min.time(), UTC)
    except ValueError:
        return None
    return start, shifted(start, timedelta(days=1))


def _month(year: str, month: int) -> Period | None:
    try:
        start = datetime(int(year), month, 1, tzinfo=UTC)
    except ValueError:
        return None
    if month == 12 and start.year == LATEST.year:
        return start, LATEST
    return start, datetime(start.year + month // 12, month % 12 + 1, 1, tzinfo=UTC)


def named_periods(question: str) -> list[Period]:
    """The half-open UTC periods the question names: its days, or else its months."""
    days = [_day(y, MONTHS[m.lower()], d) for d, m, y in DAY_MONTH_YEAR.findall(question)]
    days += [_day(y, MONTHS[m.lower()], d) for m, d, y in MONTH_DAY_YEAR.findall(question)]
    days += [_day(y, int(m), d) for y, m, d in ISO_DAY.findall(question) if 1 <= int(m) <= 12]
    found = [period for period in days if period is not None]
    if found:
        return found
    months = [_month(y, MONTHS[m.lower()]) for m, y in MONTH_YEAR.findall(question)]
    return [period for period in months if period is not None]

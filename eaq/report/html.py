"""One self-contained HTML file: what a reader needs, with nothing to fetch.

Images are embedded as base64 PNG and there is no script or external stylesheet, so the
file opens the same from disk, attached to an e-mail, or as an MLflow artifact inside the
MLflow UI (which shows HTML artifacts in a sandboxed frame that could not load links).
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from html import escape

import pandas as pd

from eaq.report.aggregate import ENERGY, QUALITY, QUALITY_DIGITS, none_counted
from eaq.report.figures import Figure
from eaq.report.frame import UNDER_WAY

STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 1200px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }
th { background: #f2f2f2; }
td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; border: 1px solid #eee; }
.note { color: #666; font-style: italic; }
code, pre { background: #f6f6f6; padding: 0.1em 0.3em; }
"""


# A statistic of spread that one trial cannot give: empty beside a measured mean (or ratio) is no missing measurement.
SPREAD = ("std", "ci_low", "ci_high", "cv")


def _fill(frame: pd.DataFrame, column: str, where: pd.Series, word: str | pd.Series) -> pd.DataFrame:
    """``column`` with ``word`` (one for all, or each row's own) in its missing cells where ``where``; its numbers
    written out to 4 digits, since to_html's float_format reads float columns only and this one now holds words too."""
    frame = frame.astype({column: object})
    frame.loc[where & frame[column].isna(), column] = word
    frame[column] = [f"{v:.4g}" if isinstance(v, float) and v == v else v for v in frame[column]]
    return frame


def _table(frame: pd.DataFrame) -> str:
    """A DataFrame as an HTML table; a missing value reads "not measured", never 0 or NaN, but a spread missing
    beside a measured mean or ratio reads "one trial": the figure was measured, once; and in a row with a ``note``
    (a ratio with no counted baseline), blank: the note says why, and "not measured" would say otherwise."""
    if frame.empty:
        return '<p class="note">none</p>'
    if "metric" in frame:  # a quality figure to its own digits: bf16's cosine of 0.9999938 read "1", as fp32's
        quality = frame["metric"].isin(QUALITY)
        for column in (c for c in ("mean", "std", "ci_low", "ci_high") if c in frame):
            frame = frame.astype({column: object})
            frame.loc[quality, column] = [f"{v:.{QUALITY_DIGITS}g}" if isinstance(v, float) and v == v else v
                                          for v in frame.loc[quality, column]]
    centre = next((c for c in ("mean", "ratio") if c in frame), None)
    if centre is not None:
        # Where the trials are counted, one of them; a ratio's interval is missing where either side has one.
        once = frame["n"] == 1 if "n" in frame else frame[centre].notna()
        for column in (c for c in SPREAD if c in frame):
            frame = _fill(frame, column, once, "one trial")
    if {"runs", "failed", "running", "invalid", "n"} <= set(frame.columns):
        # A configuration none of whose runs counted: its word ("failed"), as the summary says; "not measured" is for a
        # counted run that lacked the figure.
        words = frame.apply(none_counted, axis=1)
        for column in frame.columns[frame[words.notna()].isna().any()]:
            frame = _fill(frame, column, words.notna(), words)
    noted = frame["note"].fillna("").astype(str) != "" if "note" in frame else pd.Series(False, index=frame.index)
    for column in frame.columns[frame[noted].isna().any()]:
        frame = _fill(frame, column, noted, "")
    return frame.to_html(index=False, border=0, na_rep="not measured", float_format=lambda v: f"{v:.4g}", escape=True)


def _figure(figure: Figure) -> str:
    """A figure embedded as base64 PNG (the file needs nothing beside it), or the note saying why it is left out."""
    if figure.png is None:
        return f'<h3>{escape(figure.title)}</h3><p class="note">Left out: {escape(figure.note)}</p>'
    data = base64.b64encode(figure.png.read_bytes()).decode("ascii")
    return (f'<h3>{escape(figure.title)}</h3><img alt="{escape(figure.title)}" src="data:image/png;base64,{data}">'
            f'<p class="note">{escape(figure.png.name)} and {escape(figure.svg.name if figure.svg else "")} (300 DPI PNG, SVG) '
            "in figures/ beside this file.</p>")


def environment(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs' ``eaq.env.*`` tags: each fact with its distinct values (more than one is worth a look)."""
    columns = sorted(c for c in frame.columns if c.startswith("eaq.env."))
    rows = [{"fact": c.removeprefix("eaq.env."), "values": ", ".join(sorted(frame[c].dropna().astype(str).unique()))}
            for c in columns]
    return pd.DataFrame(rows, columns=["fact", "values"])


def problems(frame: pd.DataFrame) -> pd.DataFrame:
    """Runs that did not count: failed (with their error) or flagged invalid (with ``eaq.valid.reasons``)."""
    bad = frame[(frame["status"] != "FINISHED") | (frame["valid"] == "false")]
    why = bad["error"].where(bad["status"] != "FINISHED", bad["valid_reasons"])
    # A run marked under way: running, or left so by a process killed before it could say (its sweep ended: surely;
    # a run of no sweep, or of a sweep itself killed, cannot be told from a live one).
    under_way = bad["status"].isin(UNDER_WAY)
    why = why.mask(under_way & bad["running"], "marked running: still running, or killed before it could say").mask(
        under_way & ~bad["running"], "its sweep ended while it was marked running (its process was killed)")
    return pd.DataFrame({"run": bad["run_name"], "run id": bad["run_id"], "status": bad["status"],
                         "valid": bad["valid"].fillna(""), "why": why.fillna("no reason recorded")})


def render(title: str, scope: str, frame: pd.DataFrame, sections: dict[str, pd.DataFrame | str], figures: list[Figure],
           commands: list[str]) -> str:
    """The report as one HTML string: summary, tables, figures, invalid runs, environment, commands.

    A section given as a string is left out with that note (as a figure is), e.g. the capture ratios
    of a store without layers runs."""
    energy_notes = sorted(frame["energy_reason"].dropna().unique()) if "energy_reason" in frame else []
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{escape(title)}</title>",
        f"<style>{STYLE}</style></head><body>", f"<h1>{escape(title)}</h1>",
        f"<p>{escape(scope)}: {len(frame)} runs, {int((frame['status'] == 'FINISHED').sum())} finished. "
        f"Built {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from MLflow. Means over trials with 95% confidence "
        "intervals (Student t); invalid, failed and still running runs are counted, not averaged.</p>",
    ]
    if energy_notes:
        some = any(m in frame and frame[m].notna().any() for m in ENERGY)  # on a CPU without a sensor: on none
        parts.append(f'<p class="note">Energy not measured on {"some runs" if some else "any run"}: '
                     + escape("; ".join(energy_notes)) + "</p>")
    for heading, table in sections.items():
        parts += [f"<h2>{escape(heading)}</h2>",
                  f'<p class="note">Left out: {escape(table)}</p>' if isinstance(table, str) else _table(table)]
    parts.append("<h2>Figures</h2>")
    parts += [_figure(f) for f in figures]
    parts += ["<h2>Runs that did not count</h2>", _table(problems(frame)),
              "<h2>Environment</h2>", _table(environment(frame)),
              "<h2>Commands</h2>", "<pre>" + escape("\n".join(commands)) + "</pre>", "</body></html>"]
    return "\n".join(parts)

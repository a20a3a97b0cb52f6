"""Every run of a store: validity, poll coverage, sensor updates, energy source and energy per sample (markdown)."""

import sqlite3
import sys

KEYS = ("energy_per_sample_mj", "poll_coverage", "sensor_updates", "counter_vs_instant_disagreement", "latency_mean_ms")
TAGS = ("eaq.valid", "eaq.valid.reasons", "eaq.energy.source", "eaq.energy.notes")

con = sqlite3.connect(sys.argv[1])
runs = con.execute("select run_uuid, name from runs where name not like 'sweep%' order by start_time").fetchall()
print("| run | " + " | ".join(KEYS + TAGS) + " |")
print("|---" * (1 + len(KEYS) + len(TAGS)) + "|")
for uuid, name in runs:
    metrics = dict(con.execute("select key, value from metrics where run_uuid=?", (uuid,)).fetchall())
    tags = dict(con.execute("select key, value from tags where run_uuid=?", (uuid,)).fetchall())
    cells = [f"{metrics[k]:.4g}" if k in metrics else "" for k in KEYS] + [tags.get(t, "") for t in TAGS]
    print(f"| {name} | " + " | ".join(cells) + " |")

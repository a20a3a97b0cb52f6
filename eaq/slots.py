"""GPU slots: one job per GPU of a host at a time, and who else measured beside it.

``hydra/launcher=gpus`` (conf/hydra/launcher/gpus.yaml) runs a sweep's jobs in parallel,
one Hydra joblib worker per GPU. Pinning a job by ``CUDA_VISIBLE_DEVICES`` does not work
here: a worker runs many jobs, each run is forked from a server that the worker starts
once and that keeps the environment it started with (eaq.tasks.isolation), and the
server must not touch CUDA. So nothing changes the environment per job. Instead each job
takes a *slot* before it runs: an exclusive lock (eaq.files) on a file named by one GPU's
UUID in a host-local folder, the first one free. The job then measures on that GPU,
``device=cuda:<index>`` in the forked run, and the NVML sampler reads that GPU only (it
finds the run's GPU by UUID). The lock is the kernel's: a killed job frees its GPU; two
sweeps on one host (or jobs of another launcher) never share a GPU, they wait for one.

For index and UUID to name the same GPU, CUDA must number GPUs as NVML does (by PCI bus),
so slots set ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` before the fork server starts, and refuse a
different order set by the user. ``CUDA_VISIBLE_DEVICES`` set before the sweep (by SLURM,
say) is honoured: slots are the GPUs it names.

Neighbours: every take and release is appended to ``slots.jsonl`` in the same folder.
When a run ends it reads which other runs held a GPU of this host at any moment while it
held its own: the neighbours, recorded on the run (tag ``eaq.neighbours``), so the effect
of a busy neighbour on energy can be studied. A take without a release from a process
that is gone (killed) counts as ended, and as a neighbour where it was seen holding its
slot while this run held its own (it took it meanwhile, or held it as this run took its
own). A run on the CPU (``device=cpu``, or a host without GPUs under
``gpu_slots.count=N``) shares that CPU with every neighbour: flagged invalid
(``shared_cpu``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from eaq.errors import ISOLATE_WITH_SLOTS, ConfigError
from eaq.files import exclusive, open_shared, shared_folder, try_exclusive
from eaq.measure.nvml import device_summaries

log = logging.getLogger(__name__)
LOG_FILE = "slots.jsonl"
# How often a job that found every GPU held looks again.
WAIT_S = 0.5
ORDER = "CUDA_DEVICE_ORDER"


def visible_gpus() -> list[str]:
    """The UUIDs of the GPUs this process may use, in CUDA's order under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.

    NVML lists every GPU of the host by PCI bus; ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs)
    narrows and orders them as CUDA will.
    """
    uuids = [gpu["uuid"] for gpu in device_summaries()]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return uuids
    chosen = []
    for entry in filter(None, (e.strip() for e in visible.split(","))):
        if entry.isdigit():
            if int(entry) >= len(uuids):
                break  # CUDA stops at the first invalid entry
            chosen.append(uuids[int(entry)])
        else:
            matches = [u for u in uuids if u.startswith(entry if entry.startswith(("GPU-", "MIG-")) else f"GPU-{entry}")]
            if len(matches) != 1:
                break
            chosen.append(matches[0])
    return chosen


def slot_count(count: int | None) -> int:
    """``gpu_slots.count``, or the GPUs this process sees: the joblib preset's ``n_jobs``. A count past the GPUs seen
    is refused here, once, before the sweep starts (each of its jobs failed on it, a sweep of FAILED runs)."""
    if count is not None and count < 1:
        raise ConfigError(f"gpu_slots.count={count}: a slot count is at least 1; set N, or null for one slot per GPU.")
    if count is not None:
        _check_count(count, visible_gpus())
        return count
    found = len(visible_gpus())
    if found < 1:
        raise ConfigError(
            # Named for either way slots came on: gpu_slots.enabled=true under the basic launcher was told of a launcher
            # the user had not picked.
            "GPU slots (hydra/launcher=gpus, or gpu_slots.enabled=true) give each job one of this host's GPUs, and this "
            "process sees no GPU (NVML found none"
            + (f" among CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}" if "CUDA_VISIBLE_DEVICES" in os.environ else "")
            + "); run on a GPU host, or set gpu_slots.count=N (under hydra/launcher=gpus, N jobs at once on the CPU)."
        )
    return found


def _check_count(count: int, uuids: list[str]) -> None:
    if uuids and count > len(uuids):
        raise ConfigError(
            f"gpu_slots.count={count} but this process sees {len(uuids)} GPU(s); use at most {len(uuids)}, or null for all."
        )


# The slot keys where NVML sees no GPU: gpu0, gpu1, ... (a GPU's slot is keyed by its UUID, GPU-...).
NO_GPU_KEY = "gpu"


def _slot_keys(count: int | None) -> list[str]:
    """What each slot's lock is named by: a GPU's UUID; ``gpu<i>`` where NVML sees no GPU (a count given on a CPU host)."""
    uuids = visible_gpus()
    if count is None:
        slot_count(None)
        return uuids
    _check_count(count, uuids)
    return uuids[:count] if uuids else [f"{NO_GPU_KEY}{i}" for i in range(count)]


def pin_device_order() -> None:
    """Make CUDA number GPUs as NVML does; call before the fork server starts (it keeps this environment)."""
    order = os.environ.setdefault(ORDER, "PCI_BUS_ID")
    if order != "PCI_BUS_ID":
        raise ConfigError(
            f"gpu_slots need {ORDER}=PCI_BUS_ID (NVML's and nvidia-smi's order) to match a GPU's index to its UUID, "
            f"and the environment sets {ORDER}={order}; unset it or set it to PCI_BUS_ID."
        )


# The devices a slot can give a run: a slot picks the GPU (cuda:<its index>), or keeps CPU jobs apart.
SLOT_DEVICES = ("auto", "cuda", "cpu")


def check_slots(device: str, isolate: bool, count: int | None, here: bool = True) -> None:
    """Refuse, before any run opens, what every run under GPU slots would refuse as it took its slot: a sweep of
    FAILED runs in one sentence each (or a single run's FAILED record) for one mistake of the command line.
    ``here``: the jobs run on this host (not SLURM's nodes), whose GPUs and CUDA order they get."""
    if not isolate:
        raise ConfigError(ISOLATE_WITH_SLOTS)
    if device not in SLOT_DEVICES:
        raise ConfigError(
            f"device={device} with GPU slots (hydra/launcher=gpus, or gpu_slots.enabled=true): the slot picks each "
            "run's GPU; use device=auto (or cuda, or cpu), or pin the device yourself under the basic launcher with "
            "gpu_slots.enabled=false (one job at a time)."
        )
    if here:
        pin_device_order()
        slot_count(count)


@dataclass
class Slot:
    """A GPU held by this job: its index among the visible GPUs, and the key its lock is named by."""

    folder: Path
    index: int
    key: str
    run: str
    run_id: str
    taken: float = field(default_factory=time.time)
    # The other slots' keys held when this one was taken (``_held``): their holders ran beside this run, even one
    # killed later that never wrote its release.
    held_at_take: frozenset[str] = frozenset()

    def device(self, requested: str) -> str:
        """The run's device: ``cuda:<index>`` for ``auto`` or ``cuda``; ``cpu`` stays (the slot still keeps jobs apart),
        and so does ``auto`` on a host where NVML sees no GPU (slots named ``gpu<i>``: a count given on a CPU host)."""
        gpu = not self.key.startswith(NO_GPU_KEY)
        if requested == "cpu" or (requested == "auto" and not gpu):
            return "cpu"
        if requested in ("auto", "cuda") and gpu:
            return f"cuda:{self.index}"
        if requested == "cuda":
            raise ConfigError(
                "device=cuda with gpu_slots.count on a host where NVML sees no GPU: there is no GPU to give each slot; "
                "use device=auto or cpu."
            )
        raise AssertionError(f"device={requested} under a slot: check_slots refuses it before the run")

    def tags(self) -> dict[str, str]:
        """The slot and the neighbours so far, for the run's record (call while the slot is held)."""
        found = neighbours(self, time.time())
        return {
            "eaq.gpu_slot": str(self.index),
            "eaq.gpu_slot.key": self.key,
            "eaq.neighbours": "; ".join(found) if found else "none",
            "eaq.neighbours.count": str(len(found)),
        }


def local_executor() -> bool:
    """Whether this process is a job submitit's local executor started (``hydra/launcher=slurm_local``): that
    executor starts every job of a sweep at once on this host, so each shares the host with all the others."""
    return "SUBMITIT_LOCAL_JOB_ID" in os.environ


def shared_cpu(tags: dict[str, str]) -> str | None:
    """Why a run stands for no configuration, if it ran on the CPU beside neighbours; else None.

    A run on the CPU under GPU slots (a host without GPUs and ``gpu_slots.count=N``, or ``device=cpu`` on a GPU host)
    shares its CPU with every neighbour, whose host side runs there too: two jobs at once measured one CPU (45.8
    against ~9.5 ms a batch alone). Its timing and energy are of the crowd, so the run is flagged invalid: the report
    counts it only as such and resume measures its configuration again.
    """
    if tags.get("eaq.device") != "cpu" or tags.get("eaq.neighbours.count", "0") == "0":
        return None
    return (f"ran on the CPU beside {tags['eaq.neighbours.count']} other run(s) of this host's GPU slots, which shared "
            "that CPU: its timing and energy are theirs too; run CPU sweeps one job at a time (no hydra/launcher=gpus)")


def _append(folder: Path, entry: dict[str, Any]) -> None:
    with exclusive(folder / (LOG_FILE + ".lock"), shared=True), open_shared(folder / LOG_FILE) as handle:
        handle.write(json.dumps(entry) + "\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def neighbours(slot: Slot, until: float) -> list[str]:
    """The other runs that held a slot of this host at some moment between ``slot.taken`` and ``until``.

    Each as ``run name (gpu index, run id)``, sorted, once each.
    """
    folder = slot.folder
    held: dict[tuple[int, str], dict[str, Any]] = {}
    spans: list[tuple[dict[str, Any], float]] = []
    me = (os.getpid(), slot.key, slot.taken)
    path = folder / LOG_FILE
    with exclusive(folder / (LOG_FILE + ".lock"), shared=True):
        lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        try:
            entry = json.loads(line)
            key, event, at = (entry["pid"], entry["key"]), entry["event"], entry["time"]
        except (ValueError, KeyError, TypeError):  # a line cut by a crash mid-write: the others still tell
            continue
        if event == "take":
            # A new take of a lock proves every earlier holder of it gone: a killed job's take, never released,
            # ends here (its pid, reused by a live process, would list it beside every later run). Gone before the
            # lock was free: never a neighbour of the run that took it next (it flagged that run's CPU as shared).
            mine = (entry["pid"], entry["key"], at) == me
            for other in [k for k in held if k[1] == entry["key"]]:
                gone = held.pop(other)
                if not mine:
                    spans.append((gone, at))
            held[key] = entry
        elif key in held:
            spans.append((held.pop(key), at))
    for (pid, _), entry in held.items():  # taken and never released, nor taken again since
        if _alive(pid):
            spans.append((entry, until))
        elif entry["time"] >= slot.taken or entry["key"] in slot.held_at_take:
            # Gone since (killed), when is not told; but alive as it took its slot during this run's, or holding it
            # as this run took its own: beside this run at that moment. Dropped, a CPU run it shared was counted valid.
            spans.append((entry, max(entry["time"], slot.taken)))
    return sorted(
        {
            f"{entry['run']} (gpu {entry['index']}, run {entry['run_id']})"
            for entry, released in spans
            if (entry["pid"], entry["key"], entry["time"]) != me and entry["time"] <= until and released >= slot.taken
        }
    )


def _held(folder: Path, keys: list[str]) -> frozenset[str]:
    """Which of ``keys``' slots another job holds now: a lock taken and let go at once where free (a job taking a slot
    in that instant finds it held and takes the next, or waits its turn)."""
    found = set()
    for key in keys:
        handle = try_exclusive(folder / f"{key}.lock", shared=True)
        if handle is None:
            found.add(key)
        else:
            handle.close()
    return frozenset(found)


def _take(folder: Path, keys: list[str]) -> tuple[int, IO[str]] | None:
    for index, key in enumerate(keys):
        handle = try_exclusive(folder / f"{key}.lock", shared=True)
        if handle is not None:
            return index, handle
    return None


@contextmanager
def gpu_slot(folder: str | Path, count: int | None, run: str, run_id: str) -> Iterator[Slot]:
    """Hold the first free GPU slot of this host for the run named ``run`` (waiting while all are held); release it at exit."""
    folder = Path(folder)
    keys = _slot_keys(count)
    waited = False
    try:
        shared_folder(folder)
        taken = _take(folder, keys)
    except PermissionError as exc:
        raise _unwritable(folder, exc) from None
    while taken is None:
        if not waited:
            log.info("%s: all %d GPU slots of this host are held (%s); waiting for one", run, len(keys), folder)
            waited = True
        time.sleep(WAIT_S)
        taken = _take(folder, keys)
    index, handle = taken
    slot = Slot(folder, index, keys[index], run, run_id, held_at_take=_held(folder, [k for k in keys if k != keys[index]]))
    try:
        try:
            _append(folder, {"event": "take", "key": slot.key, "index": index, "run": run, "run_id": run_id, "pid": os.getpid(), "time": slot.taken})
        except PermissionError as exc:
            raise _unwritable(folder, exc) from None
        yield slot
    finally:
        try:
            _append(folder, {"event": "release", "key": slot.key, "pid": os.getpid(), "time": time.time()})
        except OSError as exc:  # said; the lock is let go all the same, or the worker holds the slot for good
            log.warning("%s: GPU slot %s is free, and its release could not be written to %s (%s)", run, slot.key,
                        folder / LOG_FILE, exc)
        finally:
            handle.close()


def _unwritable(folder: Path, exc: OSError) -> ConfigError:
    return ConfigError(
        f"gpu_slots.dir={folder} cannot be written by this user ({exc}); the slots of one host must share one folder "
        "every user of it can write: ask its owner to make it so (chmod 1777, its files 666), or set gpu_slots.dir."
    )

"""What the bench measures of a system's process tree: its peak memory (``TreeMemory``), its
CPU time (``tree_cpu_s``) and Spark's own metrics of the stages a run ran (``stage_metrics``,
``task_metrics``). Linux only (``/proc``)."""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from typing import Any


def _proc_status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _kb(value: str | None) -> int:
    return int(value.split()[0]) if value else 0


def _pss_kb(pid: int | str) -> int:
    """Proportional set size (shared pages split between their users), 0 if unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(_kb(line.split(":", 1)[1]) for line in f if line.startswith("Pss:"))
    except OSError:
        return 0


class TreeMemory:
    """Samples this process's descendants from /proc: the JVM and Python workers.

    Counts processes named ``java`` (except Spark's launcher JVM, ``launcher.Main``, alive only
    while the session starts) or ``python*``. Other descendants are short-lived helpers
    (``chmod``, ``readlink``) or JVM forks not yet exec'd, whose ``VmHWM`` is the JVM's own.
    Keeps each counted descendant's largest ``VmHWM`` seen (its peak RSS); the peak over the
    samples of the sum of ``VmHWM`` of this process and the counted descendants alive at that
    sample (a process that ended before another started is not added to it: a query's Python
    source runner and the next query's); and the peak of the sampled sum of ``Pss`` over the
    same processes (a page shared by several, as a forked worker shares its daemon's and
    every process the libraries' files, split between them).
    """

    def __init__(self, interval: float = 0.25, log: str | None = None) -> None:
        self.interval = interval
        self._log = open(log, "w") if log else None  # noqa: SIM115 (closed in stop)
        self._t0 = time.monotonic()
        self.hwm_kb: dict[int, tuple[str, int]] = {}
        self.tree_peak_kb = 0
        self.live_hwm_peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        total = _pss_kb("self")
        if self._log is not None:
            self._log.write(f"{time.monotonic() - self._t0:.2f}\t{os.getpid()}\t-\tdriver-python"
                            f"\t{_kb(_proc_status(os.getpid()).get('VmRSS'))}\t{total}\n")
        live = _kb(_proc_status(os.getpid()).get("VmHWM"))
        for pid in _descendants():
            try:
                status = _proc_status(pid)
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            name = status.get("Name", "?")
            if not (name == "java" or name.startswith("python")):
                continue
            if b"org.apache.spark.launcher.Main" in cmdline:
                continue
            pss = _pss_kb(pid)
            total += pss
            if self._log is not None:
                self._log.write(f"{time.monotonic() - self._t0:.2f}\t{pid}\t{status.get('PPid')}"
                                f"\t{_role(name, cmdline)}\t{_kb(status.get('VmRSS'))}\t{pss}\n")
            hwm = max(_kb(status.get("VmHWM")), self.hwm_kb.get(pid, (name, 0))[1])
            self.hwm_kb[pid] = (name, hwm)
            live += hwm
        self.tree_peak_kb = max(self.tree_peak_kb, total)
        self.live_hwm_peak_kb = max(self.live_hwm_peak_kb, live)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> TreeMemory:
        self._thread.start()
        _SAMPLERS.append(self._thread)
        return self

    def stop(self) -> dict[str, float]:
        """Stop sampling; the memory fields of the result line, in MB: ``peak_rss_mb`` (the
        peak of the sum of the live processes' peak RSS), ``hwm_sum_mb`` (every process's peak
        RSS summed, whether or not they were alive together: what ``peak_rss_mb`` was before
        issue 40), this process's, the JVM's and the Python workers' peak RSS, and
        ``tree_pss_peak_mb`` (the peak of the sampled sum of PSS: the fair number where
        processes share pages)."""
        self._stop.set()
        self._thread.join()
        self.sample()
        if self._log is not None:
            self._log.close()
        self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        jvm = sum(kb for name, kb in self.hwm_kb.values() if name == "java")
        workers = sum(kb for name, kb in self.hwm_kb.values() if name != "java")
        mb = 1024
        return {
            "peak_rss_mb": round(max(self.live_hwm_peak_kb, self_kb + jvm) / mb, 1),
            "hwm_sum_mb": round((self_kb + jvm + workers) / mb, 1),
            "python_rss_mb": round(self_kb / mb, 1),
            "jvm_rss_mb": round(jvm / mb, 1),
            "workers_rss_mb": round(workers / mb, 1),
            "tree_pss_peak_mb": round(self.tree_peak_kb / mb, 1),
        }


_SAMPLERS: list[threading.Thread] = []  # the started ``TreeMemory`` threads


def sampler_cpu_s() -> float:
    """CPU seconds used so far by the running ``TreeMemory`` sampler (0 without one): part of
    ``tree_cpu_s`` (it reads every process's ``smaps_rollup``, a cost that grows with the
    run's wall time), the bench's own cost rather than the system's."""
    for thread in _SAMPLERS:
        if thread.is_alive() and thread.ident is not None:
            return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return 0.0


def _role(name: str, cmdline: bytes) -> str:
    """A short name for what a sampled process is, for the per-sample log."""
    if name == "java":
        return "jvm"
    args = cmdline.split(b"\0")
    return (b" ".join(a for a in args[1:4] if a).decode(errors="replace")[:60]) or name


def tree_cpu_s() -> float:
    """CPU seconds (user + system) used so far by this process and its descendants: the
    JVM's and the Python workers' included (Spark's executor CPU counts JVM threads only).
    Each live process's own time plus the time of the children it has reaped, so a worker
    that exited is counted once, in its parent."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in ["self", *_descendants()]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / ticks


def _descendants() -> list[int]:
    """The pids of this process's descendants (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stage_metrics(spark: Any) -> dict[int, tuple[int, int, int]]:
    """Spark's own metrics of every stage the session's status store holds (it is kept with
    the UI off): stage id -> (shuffle bytes written, executor CPU ns, executor run ms), summed
    over the stage's attempts."""
    sc = spark.sparkContext
    jvm = sc._jvm
    stages = sc._jsc.sc().statusStore().stageList(
        None, False, False, sc._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    out: dict[int, tuple[int, int, int]] = {}
    it = stages.iterator()
    while it.hasNext():
        s = it.next()
        had = out.get(s.stageId(), (0, 0, 0))
        out[s.stageId()] = (had[0] + s.shuffleWriteBytes(), had[1] + s.executorCpuTime(),
                            had[2] + s.executorRunTime())
    return out


def task_metrics(before: dict[int, tuple[int, int, int]], after: dict[int, tuple[int, int, int]],
                 process_cpu_s: float, sampler_s: float = 0.0) -> dict[str, float]:
    """The metrics of the stages that ran between two ``stage_metrics`` snapshots:
    ``shuffle_bytes``, ``task_cpu_s`` (the executors' CPU time, JVM threads: Python workers'
    CPU is not in it) and ``task_run_s`` (the tasks' run time, Python work included); and
    ``process_cpu_s``, the CPU of the whole process tree in that time (``tree_cpu_s``: JVM,
    Python workers and driver), of which ``sampler_cpu_s`` the bench's memory sampler's
    (``sampler_cpu_s``). With ``CTI_BENCH_STAGES`` set, each new stage's numbers on stderr."""
    new = [m for sid, m in after.items() if sid not in before]
    if os.environ.get("CTI_BENCH_STAGES"):
        for sid in sorted(set(after) - set(before)):
            w, cpu, run = after[sid]
            print(f"[stage] {sid}: run {run / 1e3:.3f} s, JVM CPU {cpu / 1e9:.3f} s, "
                  f"shuffle write {w} B", file=sys.stderr, flush=True)
    return {"shuffle_bytes": sum(m[0] for m in new),
            "task_cpu_s": round(sum(m[1] for m in new) / 1e9, 3),
            "task_run_s": round(sum(m[2] for m in new) / 1e3, 3),
            "process_cpu_s": round(process_cpu_s, 3),
            "sampler_cpu_s": round(sampler_s, 3)}


def per_run(metrics: dict[str, float], runs: int) -> dict[str, float]:
    """``task_metrics`` of ``runs`` timed runs, per run (their mean)."""
    return {k: round(v / runs, 3) if isinstance(v, float) else v // runs
            for k, v in metrics.items()}

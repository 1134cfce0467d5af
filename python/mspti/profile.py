"""mspti.Profile: capture a block of code with msPTI and report on it.

Profile enables the activity kinds in-process, collects the raw records
while active, writes them with the capture code of the trace pipeline to a
trace file (the same format msptid writes), and runs the analysis engine
of ``msptictl report`` on it.  Every output method is a view of a section
of that engine; nothing is recomputed here, so ``msptictl report
<prof.trace_path>`` prints the same tables.

    with mspti.Profile() as prof:
        train(steps=10)
    print(prof.key_averages().table(sort_by="total_time", row_limit=5))

Or with a schedule, calling step() once per training step:

    prof = mspti.Profile(schedule=mspti.schedule(wait=1, warmup=1,
                                                 active=3, repeat=1))
    prof.start()
    for batch in data:
        train_step(batch)
        prof.step()
    prof.stop()
"""

import enum
import functools
import json
import os
import shutil
import tempfile
import threading
import warnings

from . import _mspti
from .constants import MsptiActivityKind, MsptiResult
from .monitor import MsptiPreloadWarning, _Core, _PRELOAD_HINT

__all__ = ["Profile", "ProfilerAction", "Schedule", "Table", "schedule"]

# What Profile records by default: everything the report uses.
DEFAULT_KINDS = (
    MsptiActivityKind.KERNEL,
    MsptiActivityKind.API,
    MsptiActivityKind.MEMCPY,
    MsptiActivityKind.MEMSET,
    MsptiActivityKind.MEMORY,
    MsptiActivityKind.HCCL,
    MsptiActivityKind.COMMUNICATION,
    MsptiActivityKind.MARKER,
)


class ProfilerAction(enum.Enum):
    """What a schedule says to do in a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class Schedule:
    """wait steps off, warmup steps enabled but discarded, active steps
    recorded; the cycle repeats repeat times (0: forever)."""

    def __init__(self, wait=0, warmup=0, active=1, repeat=0, skip_first=0):
        for name, v in (("wait", wait), ("warmup", warmup),
                        ("active", active), ("repeat", repeat),
                        ("skip_first", skip_first)):
            if not isinstance(v, int) or v < 0:
                raise ValueError("%s must be an int >= 0" % name)
        if active < 1:
            raise ValueError("active must be >= 1")
        self.wait, self.warmup, self.active = wait, warmup, active
        self.repeat, self.skip_first = repeat, skip_first

    def __call__(self, step):
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step >= self.repeat * cycle:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < self.wait:
            return ProfilerAction.NONE
        if pos < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        if pos == cycle - 1:
            return ProfilerAction.RECORD_AND_SAVE
        return ProfilerAction.RECORD

    def __repr__(self):
        return "schedule(wait=%d, warmup=%d, active=%d, repeat=%d)" % (
            self.wait, self.warmup, self.active, self.repeat)


def schedule(wait=0, warmup=0, active=1, repeat=0, skip_first=0):
    """A Schedule for Profile (as torch.profiler.schedule)."""
    return Schedule(wait, warmup, active, repeat, skip_first)


def _number(text):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


class Table:
    """One table of the analysis engine: ``columns``, ``rows`` (dicts keyed
    by column, numbers as int/float), and ``text``: the rendering of
    ``msptictl report``.  str(table) is the text."""

    def __init__(self, name, title, columns, cells, text):
        self.name = name
        self.title = title
        self.columns = list(columns)
        self.rows = [
            {col: (_number(v) if numeric else v)
             for col, (v, numeric) in zip(self.columns, row)}
            for row in cells]
        self._cells = cells
        self.text = text

    def tuples(self):
        """Rows as tuples, in column order."""
        return [tuple(r[c] for c in self.columns) for r in self.rows]

    def column(self, name):
        return [r[name] for r in self.rows]

    def to_json(self):
        return json.dumps(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    def __str__(self):
        return self.text

    def __repr__(self):
        return "<Table %s: %d rows>" % (self.name, len(self.rows))


def _render(title, columns, rows):
    # The layout of the engine's TEXT tables (lib/analysis-table.c):
    # "== title", columns two spaces apart padded to the widest cell (at
    # most 60), numbers right-aligned, "(none)" for no rows.
    widths = []
    for i, c in enumerate(columns):
        w = max([len(c)] + [len(row[i][0]) for row in rows])
        widths.append(min(w, 60))
    out = ["== %s\n" % title]
    out.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(columns)))
    out.append("\n")
    for row in rows:
        out.append("  ".join(
            (v.rjust(widths[i]) if num else v.ljust(widths[i]))
            for i, (v, num) in enumerate(row)))
        out.append("\n")
    if not rows:
        out.append("(none)\n")
    return "".join(out)


def _norm(name):
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _loss_counters(mask):
    """Loss counters by name: libmspti's drops of the kinds in mask (its
    msptiActivityGetNumDroppedRecords: failed buffer requests, channel
    overruns, ...) and the buffers the delivery layer could not queue
    (at least one record each)."""
    st = _mspti.stats()
    out = {"libmspti": int(_mspti.dropped_records(mask))}
    if "lost_buffers" in st:
        out["lost_buffers"] = int(st["lost_buffers"])
    return out


class KeyAverages(Table):
    """The per-op table (op_summary) with table(sort_by, row_limit)."""

    # torch.profiler's sort keys for the engine's columns.  An op here is
    # a device kernel: its device time is the kernel's, its CPU time the
    # host time of the launch calls that issued it.
    _ALIASES = {
        "total": "totaltime", "totaltime": "totaltime",
        "cputimetotal": "hostlaunchtotal",
        "selfcputimetotal": "hostlaunchtotal",
        "cputime": "hostlaunchavg", "selfcputime": "hostlaunchavg",
        "cputimeavg": "hostlaunchavg",
        "devicetimetotal": "totaltime", "selfdevicetimetotal": "totaltime",
        "cudatimetotal": "totaltime", "selfcudatimetotal": "totaltime",
        "nputimetotal": "totaltime", "selfnputimetotal": "totaltime",
        "devicetime": "avgtime", "cudatime": "avgtime", "nputime": "avgtime",
        "calls": "count", "count": "count", "avg": "avgtime",
        "average": "avgtime", "min": "mintime", "max": "maxtime",
        "ratio": "ratio", "share": "ratio", "name": "optype",
    }

    def _key(self, sort_by):
        want = _norm(sort_by)
        want = self._ALIASES.get(want, want)
        cols = [(_norm(c), c) for c in self.columns]
        for norm, col in cols:
            if norm == want:
                return col
        for norm, col in cols:
            if norm.startswith(want):
                return col
        raise KeyError("no column %r in %s" % (sort_by, self.columns))

    def table(self, sort_by=None, row_limit=100):
        """Text of the table sorted by a column (descending for numbers),
        at most row_limit rows (<= 0: all)."""
        cells = list(self._cells)
        if sort_by is not None:
            i = self.columns.index(self._key(sort_by))

            def key(row):
                v, numeric = row[i]
                return (1, _number(v)) if numeric else (0, v)
            cells.sort(key=key, reverse=True)
        if row_limit is not None and row_limit > 0:
            cells = cells[:row_limit]
        if sort_by is None and (row_limit is None or row_limit <= 0 or
                                row_limit >= len(self._cells)):
            return self.text
        return _render(self.title, self.columns, cells)


class Profile:
    """Profiles a block: context manager, decorator, or start()/stop()."""

    def __init__(self, kinds=None, schedule=None, on_trace_ready=None,
                 trace_path=None, step_marker="step", top_n=10):
        self.kinds = tuple(DEFAULT_KINDS if kinds is None else kinds)
        self._schedule = schedule
        self.on_trace_ready = on_trace_ready
        self._trace_path = trace_path
        self.step_marker = step_marker
        self.top_n = top_n
        self.step_num = 0
        self.unavailable = []
        self._lock = threading.RLock()
        self._action = ProfilerAction.NONE
        self._running = False
        self._enabled = []
        # The last completed window: its raw records, the records it lost,
        # and its number (outputs are cached per window).
        self._raw = b""
        self.dropped = 0
        self.windows = 0
        self._written = None        # (window, path) of the trace file
        self._analysis = None       # (window, engine)
        self._stats0 = None
        self._tmpdir = None

    # -- schedule ---------------------------------------------------------
    def schedule(self, wait=0, warmup=0, active=1, repeat=0, skip_first=0):
        """Sets the schedule; use step() once per step.  Returns self."""
        self._schedule = Schedule(wait, warmup, active, repeat, skip_first)
        return self

    def _mask(self):
        m = 0
        for k in self.kinds:
            m |= 1 << int(k)
        return m

    def _enable(self):
        if self._enabled:
            return
        missing = []
        for k in self.kinds:
            r = _mspti.enable(int(k))
            if r == MsptiResult.SUCCESS:
                self._enabled.append(k)
            else:
                missing.append((MsptiActivityKind(k), MsptiResult(r)))
        self.unavailable = missing
        preload = [k.name for k, r in missing
                   if r == MsptiResult.ERROR_WITHOUT_LD_PRELOAD]
        if preload:
            warnings.warn(_PRELOAD_HINT % ", ".join(preload),
                          MsptiPreloadWarning, stacklevel=4)

    def _disable(self):
        for k in self._enabled:
            _mspti.disable(int(k))
        self._enabled = []

    def _transition(self, new):
        old = self._action
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if new == ProfilerAction.NONE:
            if old in recording:
                self._end_window()
            self._disable()
        elif new == ProfilerAction.WARMUP:
            if old in recording:
                self._end_window()
            self._enable()
        else:
            self._enable()
            if old not in recording:
                # Warm-up records are delivered, and dropped, first.
                _mspti.flush_all()
                _mspti.profile_take()
                self._stats0 = _loss_counters(self._mask())
                _mspti.profile_collect(self._mask(), True)
        self._action = new

    def _end_window(self):
        _mspti.flush_all()
        _mspti.profile_collect(0, False)
        raw, dropped = _mspti.profile_take()
        after = _loss_counters(self._mask())
        # What was lost during the window: records the collector could
        # not keep, those libmspti dropped, buffers left unqueued.  The
        # counters are process-wide (other monitors, profiles), so the
        # figure may overstate a loss, never hide one.
        lost = dropped
        if self._stats0 is not None:
            lost += sum(max(0, after[k] - self._stats0.get(k, 0))
                        for k in after)
        self._raw = raw
        self.dropped = lost
        self.windows += 1

    def start(self):
        """Starts profiling (step 0 of the schedule, if any)."""
        with self._lock:
            if self._running:
                return self
            r = _Core.add_user(self)
            if r != MsptiResult.SUCCESS:
                raise RuntimeError("msPTI delivery could not start: %s" %
                                   MsptiResult(r).name)
            self._running = True
            self.step_num = 0
            self._transition(self._scheduled(0))
            return self

    def _scheduled(self, step):
        if self._schedule is None:
            return ProfilerAction.RECORD
        return self._schedule(step)

    def step(self):
        """Marks the end of a training step: advances the schedule."""
        with self._lock:
            if not self._running:
                return
            prev = self._action
            self.step_num += 1
            self._transition(self._scheduled(self.step_num))
            if prev == ProfilerAction.RECORD_AND_SAVE and \
                    self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def stop(self):
        """Stops profiling; the outputs then describe what was recorded."""
        with self._lock:
            if not self._running:
                return self
            was = self._action
            self._transition(ProfilerAction.NONE)
            self._running = False
            _Core.remove_user(self)
            if was in (ProfilerAction.RECORD,
                       ProfilerAction.RECORD_AND_SAVE) and \
                    self.on_trace_ready is not None and \
                    self._schedule is None:
                self.on_trace_ready(self)
            return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def __call__(self, func):
        """As a decorator: profiles each call of func."""
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper

    # -- capture and analysis ---------------------------------------------
    # Every output describes the last completed window: after stop(),
    # the window it ended; inside on_trace_ready, the cycle just saved.
    def _need_window(self):
        if self.windows == 0:
            raise RuntimeError("no completed window yet: stop the profile "
                               "first (or read it in on_trace_ready)")

    @property
    def raw_records(self):
        """The raw msPTI records of the last completed window (bytes)."""
        return self._raw

    @property
    def trace_path(self):
        """The trace file of the last completed window (written on first
        use, again for each new window)."""
        self._need_window()
        if self._written is None or self._written[0] != self.windows or \
                not os.path.exists(self._written[1]):
            self.export_trace(self._trace_path)
        return self._written[1]

    def export_trace(self, path=None):
        """Writes the last completed window as a trace file (msptictl's
        format); returns its path."""
        self._need_window()
        if path is None:
            if self._tmpdir is None:
                self._tmpdir = tempfile.mkdtemp(prefix="mspti-profile-")
            path = os.path.join(self._tmpdir, "profile.trace")
        path = os.fspath(path)
        _mspti.capture_write(self._raw, path, self.dropped)
        if self._trace_path is None or path == os.fspath(self._trace_path):
            self._written = (self.windows, path)
        return path

    def _engine(self):
        if self._analysis is None or self._analysis[0] != self.windows:
            path = self.trace_path
            self._analysis = (self.windows, _mspti.Analysis([path], {
                "top_n": self.top_n, "step_marker": self.step_marker}))
        return self._analysis[1]

    def _table(self, section, cls=Table):
        name, title, columns, cells, text = self._engine().table(section)
        return cls(name, title, columns, cells, text)

    def op_summary(self):
        """Per kernel name: calls, total/avg/min/max time, share."""
        return self._table("ops")

    def memory_summary(self):
        """Device memory: allocations and peak per device."""
        return self._table("memory")

    def memcpy_summary(self):
        """Copies by direction."""
        return self._table("memcpy")

    def communication_summary(self):
        """Collectives: count, time, bandwidth, wait."""
        return self._table("communication")

    def step_summary(self):
        """Per step breakdown (steps are MSTX ranges named step_marker)."""
        return self._table("steps")

    def summary(self, section="summary"):
        """Any section of the report by its short name."""
        return self._table(section)

    def key_averages(self):
        """The per-op table; .table(sort_by=..., row_limit=...)."""
        return self._table("ops", KeyAverages)

    def optimization_suggestions(self):
        """The advisor's findings, most severe first: dicts with severity,
        rule and message."""
        return [{"severity": s, "rule": r, "message": m}
                for s, r, m in self._engine().advice()]

    def warnings(self):
        """Problems with the input the engine noticed (losses, ...)."""
        return list(self._engine().warnings())

    def report(self):
        """The whole text report, as msptictl report prints it (per rank,
        a step summary and the slowest steps; ``table("steps")`` has every
        step)."""
        return self._engine().report()

    def export_csv(self, directory):
        """Writes msprof-style CSV tables (op_summary.csv, ...) into
        directory."""
        self._engine().export_csv(os.fspath(directory))
        return os.fspath(directory)

    def export_chrome_trace(self, path):
        """Writes the capture as Chrome trace JSON (chrome://tracing,
        Perfetto)."""
        self._engine().export_chrome(os.fspath(path))
        return os.fspath(path)

    def __del__(self):
        tmp = getattr(self, "_tmpdir", None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

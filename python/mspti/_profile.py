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
import sys
import tempfile
import threading
import warnings

from . import _mspti
from . import _frame
from .constants import MsptiActivityKind, MsptiResult
from .monitor import MsptiPreloadWarning, _Core, _PRELOAD_HINT

__all__ = ["Profile", "ProfilerAction", "ProfilerActivity", "Schedule",
           "Table", "schedule", "profile", "start", "stop",
           "record_function", "tensorboard_trace_handler"]

tensorboard_trace_handler = _frame.tensorboard_trace_handler


class ProfilerActivity(enum.Enum):
    """What a Profile records (torch.profiler.ProfilerActivity): CPU, the
    framework ops (aten ops of PyTorch, record_function ranges); NPU, the
    device activity msPTI sees (kernels, copies, collectives, launches).
    CUDA is accepted as a synonym of NPU, as torch_npu does."""

    CPU = 0
    NPU = 1
    CUDA = 1

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


class Profile:
    """Profiles a block: context manager, decorator, or start()/stop().

    activities: ProfilerActivity.CPU (framework ops) and/or .NPU (device
    activity); by default NPU, and CPU when PyTorch is already imported.
    record_shapes, with_stack (Python stack and module path) and
    profile_memory (tensor allocations) apply to the CPU activity.  kinds
    overrides the msPTI kinds NPU records."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, kinds=None,
                 trace_path=None, step_marker="step", top_n=10,
                 experimental_config=None):
        if activities is None:
            acts = {ProfilerActivity.NPU}
            self._cpu_auto = True
        else:
            acts = set()
            for a in activities:
                if isinstance(a, str):
                    a = ProfilerActivity[a.upper()]
                if not isinstance(a, ProfilerActivity):
                    raise ValueError("activities: %r is not a "
                                     "ProfilerActivity" % (a,))
                acts.add(a)
            self._cpu_auto = False
        self.activities = acts
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack) or bool(with_modules)
        if kinds is None:
            kinds = DEFAULT_KINDS if ProfilerActivity.NPU in acts else \
                (MsptiActivityKind.MARKER,)
        self.kinds = tuple(kinds)
        self._observer = None
        self._step_ev = None
        self._window = None         # (window number, _frame.Window)
        self._ops = ([], [], [])
        self.last_trace_file = None
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
        for k in self._all_kinds():
            m |= 1 << int(k)
        return m

    def _wants_cpu(self):
        if ProfilerActivity.CPU in self.activities:
            return True
        return self._cpu_auto and "torch" in sys.modules

    def _all_kinds(self):
        kinds = list(self.kinds)
        if self._wants_cpu() and \
                MsptiActivityKind.EXTERNAL_CORRELATION not in kinds and \
                MsptiActivityKind.KERNEL in kinds:
            # The launches' link to the framework op that made them.
            kinds.append(MsptiActivityKind.EXTERNAL_CORRELATION)
        return kinds

    def _observe(self, on):
        if on:
            if not self._wants_cpu():
                return
            if self._observer is None:
                try:
                    from ._observer import Observer
                    self._observer = Observer(self.record_shapes,
                                              self.with_stack,
                                              self.profile_memory)
                except ImportError:
                    if ProfilerActivity.CPU in self.activities:
                        warnings.warn("mspti.Profile: ProfilerActivity.CPU "
                                      "needs PyTorch (Debian: apt-get "
                                      "install python3-torch); recording "
                                      "device activity only", stacklevel=4)
                    self.activities.discard(ProfilerActivity.CPU)
                    self._cpu_auto = False
                    return
            self._observer.install()
        elif self._observer is not None:
            self._observer.uninstall()

    def _enable(self):
        if self._enabled:
            return
        missing = []
        for k in self._all_kinds():
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
        self._step_range(False)
        if new == ProfilerAction.NONE:
            if old in recording:
                self._end_window()
            self._observe(False)
            self._disable()
        elif new == ProfilerAction.WARMUP:
            if old in recording:
                self._end_window()
            self._observe(False)
            self._enable()
        else:
            if old in recording and old == ProfilerAction.RECORD_AND_SAVE:
                # A new cycle right after the one saved.
                self._end_window()
            self._enable()
            if old not in recording or \
                    old == ProfilerAction.RECORD_AND_SAVE:
                # Warm-up records are delivered, and dropped, first.
                _mspti.flush_all()
                _mspti.profile_take()
                self._stats0 = _loss_counters(self._mask())
                _mspti.profile_collect(self._mask(), True)
                if self._observer is not None:
                    self._observer.take()
            self._observe(True)
            self._step_range(True)
        self._action = new

    def _step_range(self, on):
        # With a schedule, each recorded step is a range "ProfilerStep#N"
        # among the framework ops, as torch.profiler records it (its
        # TensorBoard plugin finds steps by them).
        ev, self._step_ev = self._step_ev, None
        obs = self._observer
        if ev is not None and obs is not None:
            obs.close(ev)
        if on and self._schedule is not None and obs is not None and \
                obs.active:
            self._step_ev = obs.open("ProfilerStep#%d" % self.step_num)

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
        self._ops = self._observer.take() if self._observer is not None \
            else ([], [], [])
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
            _profiles.append(self)
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
            if self in _profiles:
                _profiles.remove(self)
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
        wrapper.profile = self
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

    # -- the profiling-suite summaries --------------------------------------
    def _derived(self, name, title, src, columns):
        """A Table in the profiling-suite layout from an engine section:
        columns are (heading, source column, scale) with scale None for
        text."""
        base = self._table(src)
        cells = []
        for r in base.rows:
            row = []
            for _, col, scale in columns:
                v = r.get(col, "") if col is not None else ""
                if scale is None:
                    row.append((str(v), False))
                elif scale == "int":
                    row.append(("%d" % int(v or 0), True))
                else:
                    row.append(("%.3f" % (float(v or 0) * scale), True))
            cells.append(row)
        heads = [c[0] for c in columns]
        return Table(name, title, heads, cells, _render(title, heads, cells))

    def op_summary(self):
        """Device time per op type in the profiling-suite layout: Op Type,
        Calls, Total(ms), Avg(ms), Min(ms), Max(ms), Ratio(%), highest
        total first (the engine's ops section in ms;
        ``summary("ops")`` is the section itself)."""
        return self._derived("op_summary", "Op summary (device time per op "
                             "type)", "ops",
                             [("Op Type", "OP Type", None),
                              ("Core Type", "Core Type", None),
                              ("Calls", "Count", "int"),
                              ("Total(ms)", "Total Time(us)", 1e-3),
                              ("Avg(ms)", "Avg Time(us)", 1e-3),
                              ("Min(ms)", "Min Time(us)", 1e-3),
                              ("Max(ms)", "Max Time(us)", 1e-3),
                              ("Ratio(%)", "Ratio(%)", 1)])

    def memory_summary(self):
        """Device memory per device: Device, Allocations, Frees,
        Allocated(MB), Peak(MB), Capacity(MB), Peak(%); with
        profile_memory, rows for the framework's tensors too (Device
        "tensors cpu"/"tensors npu")."""
        base = self._table("memory")
        cap = _frame.device_capacity() / 1048576.0
        heads = ["Device", "Allocations", "Frees", "Allocated(MB)",
                 "Freed(MB)", "In Use at End(MB)", "Peak(MB)",
                 "Capacity(MB)", "Peak(%)"]
        cells = []
        for r in base.rows:
            peak = float(r.get("Peak(MB)", 0) or 0)
            cells.append([(str(r.get("Device_id", "")), False),
                          ("%d" % int(r.get("Allocations", 0) or 0), True),
                          ("%d" % int(r.get("Frees", 0) or 0), True),
                          ("%.3f" % float(r.get("Allocated(MB)", 0) or 0),
                           True),
                          ("%.3f" % float(r.get("Freed(MB)", 0) or 0), True),
                          ("%.3f" % float(r.get("In Use at End(MB)", 0) or
                                          0), True),
                          ("%.3f" % peak, True), ("%.3f" % cap, True),
                          ("%.2f" % (100.0 * peak / cap), True)])
        for dev in ("cpu", "npu"):
            evs = [m for m in self._ops[2] if m.device == dev]
            if not evs:
                continue
            alloc = [m for m in evs if m.bytes > 0]
            freed = [m for m in evs if m.bytes < 0]
            peak = max(m.total for m in evs) / 1048576.0
            end = evs[-1].total / 1048576.0
            c = cap if dev == "npu" else 0.0
            cells.append([("tensors " + dev, False),
                          ("%d" % len(alloc), True), ("%d" % len(freed), True),
                          ("%.3f" % (sum(m.bytes for m in alloc) / 1048576.0),
                           True),
                          ("%.3f" % (-sum(m.bytes for m in freed) /
                                     1048576.0), True),
                          ("%.3f" % end, True), ("%.3f" % peak, True),
                          ("%.3f" % c, True),
                          ("%.2f" % (100.0 * peak / c if c else 0.0), True)])
        title = "Memory summary (device memory, peak against capacity)"
        return Table("memory_summary", title, heads, cells,
                     _render(title, heads, cells))

    def memcpy_summary(self):
        """Copies by direction."""
        return self._table("memcpy")

    def communication_summary(self):
        """Collectives per op type in the profiling-suite layout: Op Type,
        Calls, Total(ms), Avg(ms), Min(ms), Max(ms), Ratio(%), Size(MB),
        Bandwidth(GB/s), Wait(ms), Wait Ratio."""
        return self._derived("communication_summary", "Communication "
                             "summary (collectives per op type)",
                             "communication",
                             [("Op Type", "OP Type", None),
                              ("Calls", "Count", "int"),
                              ("Total(ms)", "Total Time(us)", 1e-3),
                              ("Avg(ms)", "Avg Time(us)", 1e-3),
                              ("Min(ms)", "Min Time(us)", 1e-3),
                              ("Max(ms)", "Max Time(us)", 1e-3),
                              ("Ratio(%)", "Ratio(%)", 1),
                              ("Size(MB)", "Transit Size(MB)", 1),
                              ("Bandwidth(GB/s)", "Bandwidth(GB/s)", 1),
                              ("Wait(ms)", "Wait Time(us)", 1e-3),
                              ("Wait Ratio", "Wait Ratio", 1)])

    def step_summary(self):
        """Per step breakdown (steps are MSTX ranges named step_marker)."""
        return self._table("steps")

    def summary(self, section="summary"):
        """Any section of the report by its short name."""
        return self._table(section)

    # -- framework ops (ProfilerActivity.CPU) ------------------------------
    def _frame_window(self):
        self._need_window()
        if self._window is None or self._window[0] != self.windows:
            ops, mods, mem = self._ops
            self._window = (self.windows,
                            _frame.Window(self._raw, ops, mods, mem))
        return self._window[1]

    def events(self):
        """The framework ops and ranges of the window (OpEvents: name,
        start, end in ns, tid, seq, shapes, dtypes, stack, module, id)
        in completion order."""
        return list(self._frame_window().ops)

    def device_activities(self):
        """The window's kernels, copies and collectives
        (DeviceActivity: name, start, end, device, stream, correlation,
        type, op: the id of the framework op that launched it, 0 if
        none)."""
        return list(self._frame_window().device)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """Framework ops, runtime calls and device activities averaged by
        name (and input shapes, and the top group_by_stack_n frames), as
        torch.profiler's key_averages(): .table(sort_by=..., row_limit=...)
        and EventAvg rows (cpu_time_total, self_cpu_time_total,
        npu_time_total, count, ... in us)."""
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) "
                               "needs Profile(record_shapes=True)")
        if group_by_stack_n and not self.with_stack:
            raise RuntimeError("key_averages(group_by_stack_n=N) needs "
                               "Profile(with_stack=True)")
        return _frame.key_averages(
            self._frame_window(), group_by_input_shape, group_by_stack_n,
            npu=ProfilerActivity.NPU in self.activities,
            memory=self.profile_memory)

    def optimization_suggestions(self):
        """The advisor's findings, most severe first: dicts with severity,
        rule and message.  Besides the engine's rules (those of msptictl
        report): op_share (the op type with the largest share of device
        time, and the framework op with the largest share of host time),
        memory_peak (peak device memory against capacity) and comm_share
        (collectives' share of device time), each naming what to try."""
        out = [{"severity": s, "rule": r, "message": m}
               for s, r, m in self._engine().advice()]
        out += self._own_advice()
        rank = {"High": 0, "Medium": 1, "Low": 2}
        out.sort(key=lambda a: rank.get(a["severity"], 3))
        return out

    def _own_advice(self):
        out = []

        def add(sev, rule, msg):
            out.append({"severity": sev, "rule": rule, "message": msg})
        ops = self._table("ops").rows
        kernel_total = sum(float(r.get("Total Time(us)", 0) or 0)
                           for r in ops)
        if ops and kernel_total > 0:
            top = max(ops, key=lambda r: float(r.get("Total Time(us)", 0)))
            share = 100.0 * float(top["Total Time(us)"]) / kernel_total
            if share >= 25.0:
                add("High" if share >= 50.0 else "Medium", "op_share",
                    "%s takes %.1f%% of device time (%d calls, %.3f ms): %s"
                    % (top["OP Type"], share, int(top.get("Count", 0)),
                       float(top["Total Time(us)"]) / 1e3,
                       _op_hint(top["OP Type"], top.get("Core Type", ""))))
        if self._ops[0]:
            ka = self.key_averages()
            fw = [r for r in ka if not r.is_device and
                  r.key.startswith("aten::")]
            tot = ka.self_cpu_time_total
            if fw and tot > 0:
                top = max(fw, key=lambda r: r.self_cpu_time_total)
                share = 100.0 * top.self_cpu_time_total / tot
                if share >= 25.0:
                    add("Medium", "op_share",
                        "%s takes %.1f%% of host (CPU) time (%d calls, "
                        "%.3f ms self): the host dispatch is the cost; try "
                        "fewer, larger ops (fuse, batch), torch.jit or a "
                        "graph mode, or overlap it with device work"
                        % (top.key, share, top.count,
                           top.self_cpu_time_total / 1e3))
        cap = _frame.device_capacity()
        for r in self._table("memory").rows:
            peak = float(r.get("Peak(MB)", 0) or 0) * 1048576.0
            pct = 100.0 * peak / cap
            dev = r.get("Device_id", "")
            if pct >= 90.0:
                add("High", "memory_peak",
                    "device %s: memory peak %.0f MB is %.1f%% of its %.0f "
                    "MB: close to out-of-memory; try a smaller batch, "
                    "activation checkpointing, mixed precision (fp16/bf16) "
                    "or releasing cached blocks" % (dev, peak / 1048576.0,
                                                   pct, cap / 1048576.0))
            elif pct >= 75.0:
                add("Medium", "memory_peak",
                    "device %s: memory peak %.0f MB is %.1f%% of its %.0f "
                    "MB: little headroom; try activation checkpointing or "
                    "mixed precision before growing the batch"
                    % (dev, peak / 1048576.0, pct, cap / 1048576.0))
            elif peak >= 64 * 1048576.0 and pct < 10.0:
                add("Low", "memory_peak",
                    "device %s: memory peak %.0f MB is only %.1f%% of its "
                    "%.0f MB: a larger batch (or a larger model per device) "
                    "would use the device better"
                    % (dev, peak / 1048576.0, pct, cap / 1048576.0))
        comm = self._table("communication").rows
        comm_total = sum(float(r.get("Total Time(us)", 0) or 0)
                         for r in comm)
        if comm_total > 0:
            share = 100.0 * comm_total / (comm_total + kernel_total)
            top = max(comm, key=lambda r: float(r.get("Total Time(us)", 0)))
            if share >= 20.0:
                add("High" if share >= 40.0 else "Medium", "comm_share",
                    "communication takes %.1f%% of device time (%.3f ms, "
                    "most in %s): overlap it with backward (DDP buckets, "
                    "bucket_cap_mb), use fewer and larger buckets, "
                    "accumulate gradients over steps or compress them"
                    % (share, comm_total / 1e3, top["OP Type"]))
        return out
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

    def export_chrome_trace(self, path, kineto=None):
        """Writes the window as Chrome trace JSON (chrome://tracing,
        Perfetto).  With framework ops recorded (or kineto=True), the
        layout of torch.profiler's Kineto traces: cpu_op slices, runtime
        calls, kernels and an ac2g flow from each launch to its kernel;
        otherwise the engine's timeline (msptictl export)."""
        path = os.fspath(path)
        if kineto is None:
            kineto = bool(self._ops[0])
        if kineto:
            return _frame.write_trace(self._frame_window(), path,
                                      {"dropped": self.dropped})
        self._engine().export_chrome(path)
        return path

    def __del__(self):
        tmp = getattr(self, "_tmpdir", None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _op_hint(name, core):
    n = name.lower()
    if "conv" in n or "matmul" in n or core == "AI_CORE":
        return ("the cube units bound the model; try mixed precision "
                "(fp16/bf16 with AMP), batch sizes and channels that are "
                "multiples of 16, and keeping activations in 5HD (no "
                "TransData between convolutions)")
    if n == "transdata":
        return ("layout conversions; keep tensors in one format between "
                "ops (avoid reshapes and non-5HD ops between convolutions)")
    if core == "AI_CPU":
        return "an AI CPU op; replace it by one that runs on AI Core"
    return ("a vector op; fuse it with its neighbours (fused optimizers, "
            "fused elementwise kernels) or run fewer, larger ones")


_default = None
_default_lock = threading.Lock()


def start(*args, **kwargs):
    """Starts a process-wide Profile (arguments as Profile's) and returns
    it; mspti.stop() ends it."""
    global _default
    with _default_lock:
        if _default is not None and _default._running:
            raise RuntimeError("mspti.start(): a profile is already "
                               "running; call mspti.stop() first")
        _default = Profile(*args, **kwargs)
    return _default.start()


def stop():
    """Stops the Profile mspti.start() started and returns it (its outputs
    describe what was recorded)."""
    global _default
    with _default_lock:
        p = _default
    if p is None:
        raise RuntimeError("mspti.stop(): no profile was started with "
                           "mspti.start()")
    return p.stop()


def profile(*args, **kwargs):
    """A Profile: ``with mspti.profile(...) as prof:``, or as a decorator
    factory, ``@mspti.profile(...)``, which profiles each call of the
    function (the wrapper's ``.profile`` is the Profile).  ``@mspti.profile``
    without arguments works too."""
    if len(args) == 1 and not kwargs and callable(args[0]) and \
            not isinstance(args[0], (list, tuple, set)):
        return Profile()(args[0])
    return Profile(*args, **kwargs)


class record_function:
    """A named range on the host timeline, as
    torch.profiler.record_function: with framework ops recorded it is an
    op of its own (its children's time is not its self time, and kernels
    launched in it without a framework op link to it); it is also an MSTX
    range, so msptictl captures see it."""

    def __init__(self, name, args=None):
        self.name = name
        self._ev = None
        self._obs = None
        self._rid = None

    def __enter__(self):
        obs = _active_observer()
        if obs is not None:
            self._obs = obs
            self._ev = obs.open(self.name, "range")
        from . import mstx
        self._rid = mstx.range_start(self.name)
        return self

    def __exit__(self, *exc):
        from . import mstx
        if self._rid is not None:
            mstx.range_end(self._rid)
        if self._ev is not None:
            self._obs.close(self._ev)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*a, **kw):
            with record_function(self.name):
                return func(*a, **kw)
        return wrapper


_profiles = []


def _active_observer():
    for p in reversed(_profiles):
        o = p._observer
        if o is not None and o.active:
            return o
    return None

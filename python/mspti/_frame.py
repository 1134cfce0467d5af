"""The framework-op view of a Profile window: links device activity to
the framework ops that launched it, averages them as torch.profiler's
key_averages() does, and writes Kineto-style trace JSON.

A window's inputs are the raw msPTI records (decoded by
_mspti.profile_records) and the observer's OpEvents.  A kernel links to
an op through msPTI's correlation: the kernel record carries the
correlation id of the launch API call, whose EXTERNAL_CORRELATION record
carries the id of the op that was innermost on that thread when the call
was made.
"""

import json
import os
import socket
import time

from . import _mspti

K_KERNEL, K_API, K_HCCL, K_MEMORY, K_MEMSET, K_MEMCPY, K_EXT = \
    2, 3, 4, 5, 6, 7, 8
_API_KINDS = (3, 10, 11, 12)
_EXT_CUSTOM0 = 2
_MEMCPY_NAMES = {0: "Memcpy Unknown", 1: "Memcpy HtoH", 2: "Memcpy HtoD",
                 3: "Memcpy DtoH", 4: "Memcpy DtoD", 5: "Memcpy Default"}


class DeviceActivity:
    """A kernel, copy or collective on a device (times in ns)."""

    __slots__ = ("name", "start", "end", "device", "stream", "correlation",
                 "type", "op", "api")

    def __init__(self, name, start, end, device, stream, correlation, type):
        self.name, self.start, self.end = name, start, end
        self.device, self.stream = device, stream
        self.correlation, self.type = correlation, type
        self.op = 0             # id of the framework op that launched it
        self.api = None         # the launch API record

    @property
    def duration(self):
        return max(0, self.end - self.start)


class ApiCall:
    __slots__ = ("name", "start", "end", "pid", "tid", "correlation", "op")

    def __init__(self, name, start, end, pid, tid, correlation):
        self.name, self.start, self.end = name, start, end
        self.pid, self.tid, self.correlation = pid, tid, correlation
        self.op = 0


class Window:
    """One completed window: ops, API calls and device activities,
    linked."""

    def __init__(self, raw, ops, modules, mem):
        self.ops = ops
        self.modules = modules
        self.mem = mem
        self.apis = []
        self.device = []
        self.dev_mem = []       # (ts, device, +/-bytes) of device memory
        ext = {}
        recs = _mspti.profile_records(raw) if raw else []
        by_corr = {}
        for r in recs:
            k = r[0]
            if k == K_EXT:
                if r[1] == _EXT_CUSTOM0:
                    ext[r[3]] = r[2]
            elif k in _API_KINDS:
                a = ApiCall(r[6], r[1], r[2], r[3], r[4], r[5])
                self.apis.append(a)
                by_corr[a.correlation] = a
            elif k == K_KERNEL:
                self.device.append(DeviceActivity(r[7], r[1], r[2], r[3],
                                                  r[4], r[5], r[6]))
            elif k == K_MEMCPY:
                self.device.append(DeviceActivity(
                    _MEMCPY_NAMES.get(r[1], "Memcpy"), r[3], r[4], r[5],
                    r[6], r[7], "MEMCPY"))
            elif k == K_HCCL:
                self.device.append(DeviceActivity(r[6], r[1], r[2], r[3],
                                                  r[4], 0, "HCCL"))
            elif k == K_MEMORY:
                # op 0: allocate, 1: release (msptiActivityMemoryOperationType)
                self.dev_mem.append((r[4], r[8], r[7] if r[1] == 0
                                     else -r[7]))
        for a in self.apis:
            a.op = ext.get(a.correlation, 0)
        for d in self.device:
            if d.correlation:
                d.op = ext.get(d.correlation, 0)
                d.api = by_corr.get(d.correlation)
        self.device.sort(key=lambda d: d.start)
        self.ops_by_id = {e.id: e for e in ops}


# -- key_averages ----------------------------------------------------------

def _fmt_us(us):
    """torch.profiler's time format: us, ms or s with 3 decimals."""
    if us >= 1e6:
        return "%.3fs" % (us / 1e6)
    if us >= 1e3:
        return "%.3fms" % (us / 1e3)
    return "%.3fus" % us


def _fmt_mem(b):
    kb, mb, gb = 1024, 1024 * 1024, 1024 * 1024 * 1024
    if abs(b) >= gb:
        return "%.2f Gb" % (b / gb)
    if abs(b) >= mb:
        return "%.2f Mb" % (b / mb)
    if abs(b) >= kb:
        return "%.2f Kb" % (b / kb)
    return "%d b" % b


def _pct(x, total):
    return "%.2f%%" % (100.0 * x / total if total else 0.0)


class EventAvg:
    """One row of key_averages(): times in us as torch's FunctionEventAvg
    (cpu_time_total, self_cpu_time_total, cpu_time, npu_time_total,
    self_npu_time_total, npu_time, count, input_shapes, ...)."""

    def __init__(self, key, shapes=None, stack=None):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.npu_time_total = 0.0
        self.self_npu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.npu_memory_usage = 0
        self.self_npu_memory_usage = 0
        self.input_shapes = shapes
        self.stack = stack
        self.is_device = False

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def npu_time(self):
        return self.npu_time_total / self.count if self.count else 0.0

    # torch's names for the device columns.
    device_time_total = cuda_time_total = property(
        lambda s: s.npu_time_total)
    self_device_time_total = self_cuda_time_total = property(
        lambda s: s.self_npu_time_total)
    device_time = cuda_time = property(lambda s: s.npu_time)

    def __repr__(self):
        return "<EventAvg %s count=%d cpu_total=%.3fus npu_total=%.3fus>" % (
            self.key, self.count, self.cpu_time_total, self.npu_time_total)


# Sort keys: torch.profiler's (and their device/cuda spellings), then the
# column names, normalized (case and punctuation ignored).
_SORT = {
    "cputimetotal": "cpu_time_total", "cputotal": "cpu_time_total",
    "selfcputimetotal": "self_cpu_time_total", "selfcpu":
    "self_cpu_time_total", "cputime": "cpu_time", "cputimeavg": "cpu_time",
    "selfcputime": "self_cpu_time_total",
    "nputimetotal": "npu_time_total", "nputotal": "npu_time_total",
    "selfnputimetotal": "self_npu_time_total",
    "selfnpu": "self_npu_time_total", "nputime": "npu_time",
    "nputimeavg": "npu_time",
    "count": "count", "calls": "count", "ofcalls": "count",
    "cpumemoryusage": "cpu_memory_usage", "cpumem": "cpu_memory_usage",
    "selfcpumemoryusage": "self_cpu_memory_usage",
    "selfcpumem": "self_cpu_memory_usage",
    "npumemoryusage": "npu_memory_usage", "npumem": "npu_memory_usage",
    "selfnpumemoryusage": "self_npu_memory_usage",
    "selfnpumem": "self_npu_memory_usage",
    "name": "key", "key": "key",
    # The names of the engine's op table (device time).
    "total": "npu_time_total", "totaltime": "npu_time_total",
    "ratio": "npu_time_total", "share": "npu_time_total",
    "avg": "npu_time", "avgtime": "npu_time", "average": "npu_time",
}
for _dev in ("device", "cuda"):
    for _k in list(_SORT):
        if "npu" in _k:
            _SORT.setdefault(_k.replace("npu", _dev), _SORT[_k])


def _norm(s):
    return "".join(ch for ch in s.lower() if ch.isalnum())


class KeyAverages:
    """key_averages(): EventAvg rows (iterate, index, len) and
    table(sort_by, row_limit) in torch.profiler's layout."""

    def __init__(self, rows, npu=True, memory=False, shapes=False,
                 stack_n=0):
        self._rows = rows
        self._npu = npu
        self._memory = memory
        self._shapes = shapes
        self._stack_n = stack_n
        self.self_cpu_time_total = sum(r.self_cpu_time_total for r in rows)
        # Device time counted once, at the device rows (as torch counts
        # its kernels' rows, not the ops that launched them).
        self.self_npu_time_total = sum(r.self_npu_time_total for r in rows
                                       if r.is_device)

    @property
    def columns(self):
        cols = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total",
                "CPU time avg"]
        if self._npu:
            cols += ["Self NPU", "Self NPU %", "NPU total", "NPU time avg"]
        if self._memory:
            cols += ["CPU Mem", "Self CPU Mem"]
            if self._npu:
                cols += ["NPU Mem", "Self NPU Mem"]
        cols.append("# of Calls")
        if self._shapes:
            cols.append("Input Shapes")
        if self._stack_n:
            cols.append("Source Location")
        return cols

    @property
    def rows(self):
        """Rows as dicts keyed by column, times in us, memory in bytes."""
        out = []
        ct, nt = self.self_cpu_time_total, self.self_npu_time_total
        for r in self._rows:
            d = {"Name": r.key,
                 "Self CPU %": 100.0 * r.self_cpu_time_total / ct if ct
                 else 0.0,
                 "Self CPU": r.self_cpu_time_total,
                 "CPU total %": 100.0 * r.cpu_time_total / ct if ct else 0.0,
                 "CPU total": r.cpu_time_total, "CPU time avg": r.cpu_time}
            if self._npu:
                d.update({"Self NPU": r.self_npu_time_total,
                          "Self NPU %": 100.0 * r.self_npu_time_total / nt
                          if nt else 0.0,
                          "NPU total": r.npu_time_total,
                          "NPU time avg": r.npu_time})
            if self._memory:
                d.update({"CPU Mem": r.cpu_memory_usage,
                          "Self CPU Mem": r.self_cpu_memory_usage})
                if self._npu:
                    d.update({"NPU Mem": r.npu_memory_usage,
                              "Self NPU Mem": r.self_npu_memory_usage})
            d["# of Calls"] = r.count
            if self._shapes:
                d["Input Shapes"] = str(r.input_shapes or [])
            if self._stack_n:
                d["Source Location"] = "\n".join(r.stack or [])
            out.append(d)
        return out

    def __iter__(self):
        return iter(self._rows)

    def __len__(self):
        return len(self._rows)

    def __getitem__(self, i):
        return self._rows[i]

    def _attr(self, sort_by):
        a = _SORT.get(_norm(sort_by))
        if a is None:
            a = sort_by if hasattr(EventAvg(""), sort_by) else None
        if a is None:
            raise KeyError("key_averages: no sort key %r (try "
                           "cpu_time_total, self_cpu_time_total, "
                           "npu_time_total, self_npu_time_total, cpu_time, "
                           "npu_time, count, cpu_memory_usage, "
                           "self_cpu_memory_usage)" % (sort_by,))
        return a

    def sorted(self, sort_by):
        a = self._attr(sort_by)
        return sorted(self._rows, key=lambda r: getattr(r, a),
                      reverse=(a != "key"))

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55,
              header=None, top_level_events_only=False):
        """The table as torch.profiler prints it: rows sorted by sort_by
        (highest first), at most row_limit (<= 0: all)."""
        rows = self.sorted(sort_by) if sort_by is not None else \
            list(self._rows)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        cols = self.columns
        ct, nt = self.self_cpu_time_total, self.self_npu_time_total
        cells = []
        for r in rows:
            name = r.key
            if len(name) > max_name_column_width:
                name = name[:max_name_column_width - 3] + "..."
            c = [name, _pct(r.self_cpu_time_total, ct),
                 _fmt_us(r.self_cpu_time_total), _pct(r.cpu_time_total, ct),
                 _fmt_us(r.cpu_time_total), _fmt_us(r.cpu_time)]
            if self._npu:
                c += [_fmt_us(r.self_npu_time_total),
                      _pct(r.self_npu_time_total, nt),
                      _fmt_us(r.npu_time_total), _fmt_us(r.npu_time)]
            if self._memory:
                c += [_fmt_mem(r.cpu_memory_usage),
                      _fmt_mem(r.self_cpu_memory_usage)]
                if self._npu:
                    c += [_fmt_mem(r.npu_memory_usage),
                          _fmt_mem(r.self_npu_memory_usage)]
            c.append(str(r.count))
            if self._shapes:
                c.append(str(r.input_shapes or []))
            if self._stack_n:
                c.append((r.stack or [""])[0])
            cells.append(c)
        widths = [max([len(h)] + [len(row[i]) for row in cells])
                  for i, h in enumerate(cols)]
        sep = "  ".join("-" * w for w in widths)
        out = []
        if header:
            out += ["=" * len(sep), header]
        out.append(sep)
        out.append("  ".join(h.rjust(w) for h, w in zip(cols, widths)))
        out.append(sep)
        for row in cells:
            out.append("  ".join(v.rjust(w) for v, w in zip(row, widths)))
        out.append(sep)
        out.append("Self CPU time total: %s" % _fmt_us(ct))
        if self._npu:
            out.append("Self NPU time total: %s" % _fmt_us(nt))
        return "\n".join(out) + "\n"

    def __str__(self):
        return self.table()

    def __repr__(self):
        return "<KeyAverages: %d rows>" % len(self._rows)


def key_averages(win, group_by_input_shape=False, group_by_stack_n=0,
                 npu=True, memory=False):
    """Averages of a window's ops, API calls and device activities."""
    rows = {}
    child_cpu = {}
    child_npu = {}
    child_mem = {}
    self_npu = {}
    for d in win.device:
        if d.op:
            self_npu[d.op] = self_npu.get(d.op, 0) + d.duration
    for a in win.apis:
        if a.op:
            child_cpu[a.op] = child_cpu.get(a.op, 0) + (a.end - a.start)

    def row(key, shapes=None, stack=None):
        k = (key, str(shapes) if group_by_input_shape else None,
             tuple(stack[:group_by_stack_n]) if group_by_stack_n and stack
             else None)
        r = rows.get(k)
        if r is None:
            r = rows[k] = EventAvg(key, shapes if group_by_input_shape
                                   else None,
                                   list(stack[:group_by_stack_n])
                                   if group_by_stack_n and stack else None)
        return r

    # Ops are in completion order: children before their parent.
    for e in win.ops:
        dur = max(0, e.end - e.start)
        snpu = self_npu.get(e.id, 0)
        tnpu = snpu + child_npu.get(e.id, 0)
        smem = e.mem_self
        cm = child_mem.get(e.id, (0, 0))
        r = row(e.name, e.shapes, e.stack)
        r.count += 1
        r.cpu_time_total += dur / 1e3
        r.self_cpu_time_total += max(0, dur - child_cpu.get(e.id, 0)) / 1e3
        r.self_npu_time_total += snpu / 1e3
        r.npu_time_total += tnpu / 1e3
        r.self_cpu_memory_usage += smem[0]
        r.self_npu_memory_usage += smem[1]
        r.cpu_memory_usage += smem[0] + cm[0]
        r.npu_memory_usage += smem[1] + cm[1]
        if e.parent:
            child_cpu[e.parent] = child_cpu.get(e.parent, 0) + dur
            child_npu[e.parent] = child_npu.get(e.parent, 0) + tnpu
            pm = child_mem.get(e.parent, (0, 0))
            child_mem[e.parent] = (pm[0] + smem[0] + cm[0],
                                   pm[1] + smem[1] + cm[1])
    for a in win.apis:
        dur = max(0, a.end - a.start)
        r = row(a.name)
        r.count += 1
        r.cpu_time_total += dur / 1e3
        r.self_cpu_time_total += dur / 1e3
    for d in win.device:
        r = row(d.name)
        r.is_device = True
        r.count += 1
        r.self_npu_time_total += d.duration / 1e3
        r.npu_time_total += d.duration / 1e3
    return KeyAverages(list(rows.values()), npu=npu, memory=memory,
                       shapes=group_by_input_shape,
                       stack_n=group_by_stack_n)


# -- Kineto-style trace JSON -----------------------------------------------

def _us(ns):
    return ns / 1e3


def device_capacity():
    """Bytes of memory of one simulated device (NPUSIM_MEM_MB, 16384 by
    default, as libnpusim reads it)."""
    try:
        mb = int(os.environ.get("NPUSIM_MEM_MB", "16384"))
    except ValueError:
        mb = 16384
    return max(1, mb) << 20


def dist_info():
    """(backend, rank, world_size) of this process: the bridge's process
    group when one is initialized, else torchrun's variables."""
    import sys
    rank, world = None, None
    dist = sys.modules.get("mspti.npusim.torch._dist")
    if dist is not None:
        try:
            if dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
        except Exception:   # noqa: BLE001 - best effort
            rank = None
    if rank is None:
        try:
            rank = int(os.environ.get("RANK", "0"))
            world = int(os.environ.get("WORLD_SIZE", "1"))
        except ValueError:
            rank, world = 0, 1
    return "hccl", rank, world


def trace_json(win, start_ns=0, stats=None):
    """The window as a dict in the layout of torch.profiler's Kineto
    traces: traceEvents (cpu_op, python_function, cuda_runtime, kernel,
    gpu_memcpy, [memory], ac2g flows), distributedInfo, deviceProperties.
    Device activities keep Kineto's categories so trace tools find them;
    their pid is the device, their tid the stream."""
    pid = os.getpid()
    ev = []
    devices = sorted({d.device for d in win.device} |
                     {dev for _, dev, _ in win.dev_mem})
    tids = sorted({e.tid for e in win.ops} | {a.tid for a in win.apis})
    ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
               "args": {"name": "python3 (pid %d)" % pid}})
    for t in tids:
        ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": t,
                   "args": {"name": "thread %d" % t}})
    for d in devices:
        ev.append({"ph": "M", "name": "process_name", "pid": d, "tid": 0,
                   "args": {"name": "NPU %d" % d}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": d,
                   "tid": 0, "args": {"sort_index": 1000 + d}})
    for e in win.ops:
        args = {"External id": e.id}
        if e.seq >= 0:
            args["Sequence number"] = e.seq
            args["Fwd thread id"] = e.tid if e.fwd else 0
        if e.shapes is not None:
            args["Input Dims"] = e.shapes
            args["Input type"] = e.dtypes
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        if e.module:
            args["Module Hierarchy"] = e.module
        cat = "user_annotation" if e.kind == "range" else "cpu_op"
        ev.append({"ph": "X", "cat": cat, "name": e.name, "pid": pid,
                   "tid": e.tid, "ts": _us(e.start),
                   "dur": _us(max(0, e.end - e.start)), "args": args})
    for m in win.modules:
        ev.append({"ph": "X", "cat": "python_function",
                   "name": "nn.Module: " + m.path, "pid": pid, "tid": m.tid,
                   "ts": _us(m.start), "dur": _us(max(0, m.end - m.start)),
                   "args": {}})
    for a in win.apis:
        args = {"correlation": a.correlation}
        if a.op:
            args["External id"] = a.op
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": a.name,
                   "pid": a.pid or pid, "tid": a.tid, "ts": _us(a.start),
                   "dur": _us(max(0, a.end - a.start)), "args": args})
    for d in win.device:
        cat = {"MEMCPY": "gpu_memcpy", "HCCL": "kernel"}.get(d.type,
                                                             "kernel")
        args = {"device": d.device, "stream": d.stream,
                "correlation": d.correlation, "type": d.type}
        if d.op:
            args["External id"] = d.op
        ev.append({"ph": "X", "cat": cat, "name": d.name, "pid": d.device,
                   "tid": d.stream, "ts": _us(d.start),
                   "dur": _us(d.duration), "args": args})
        if d.api is not None:
            # The launch's flow, as Kineto's ac2g: from the runtime call
            # (inside the op that made it) to the device activity.
            a = d.api
            ev.append({"ph": "s", "id": d.correlation, "pid": a.pid or pid,
                       "tid": a.tid, "ts": _us(a.start), "cat": "ac2g",
                       "name": "ac2g"})
            ev.append({"ph": "f", "id": d.correlation, "pid": d.device,
                       "tid": d.stream, "ts": _us(d.start), "cat": "ac2g",
                       "name": "ac2g", "bp": "e"})
    for m in win.mem:
        ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event",
                   "name": "[memory]", "pid": pid, "tid": m.tid,
                   "ts": _us(m.ts),
                   "args": {"Device Type": 0 if m.device == "cpu" else 20,
                            "Device Id": -1 if m.device == "cpu" else
                            (devices[0] if devices else 0),
                            "Addr": m.addr, "Bytes": m.bytes,
                            "Total Allocated": m.total,
                            "Total Reserved": m.total}})
    backend, rank, world = dist_info()
    cap = device_capacity()
    out = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": d, "name": "Ascend NPU (npusim)", "totalGlobalMem": cap,
             "computeMajor": 0, "computeMinor": 0, "maxThreadsPerBlock": 0,
             "numSms": 24, "regsPerBlock": 0, "sharedMemPerBlock": 0,
             "warpSize": 0} for d in devices],
        "distributedInfo": {"backend": backend, "rank": rank,
                            "world_size": world},
        "traceEvents": ev,
        "traceName": "",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 0,
    }
    if stats:
        out["mspti"] = stats
    return out


def write_trace(win, path, stats=None):
    doc = trace_json(win, stats=stats)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)
    return path


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """on_trace_ready handler that writes each window as
    ``<dir>/<worker>.<ms timestamp>.pt.trace.json`` (torch.profiler's
    names; worker defaults to ``<host>_<pid>``), one file per rank and
    window."""
    if use_gzip:
        raise ValueError("tensorboard_trace_handler: use_gzip is not "
                         "supported")

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        w = worker_name or "%s_%d" % (socket.gethostname(), os.getpid())
        stamp = int(time.time() * 1000)
        path = os.path.join(dir_name, "%s.%d.pt.trace.json" % (w, stamp))
        while os.path.exists(path):
            stamp += 1
            path = os.path.join(dir_name, "%s.%d.pt.trace.json" % (w, stamp))
        prof.export_chrome_trace(path, kineto=True)
        prof.last_trace_file = path
    return handler

"""Framework-op observer of mspti.Profile's CPU activity.

While a profile records CPU activity it pushes a TorchDispatchMode on the
profiling thread (and, with with_stack, global module forward hooks).  The
mode sees every aten op after autograd and decompositions, bridge or
plain CPU torch, and records its host start and end (CLOCK_REALTIME ns,
the clock of msPTI's records), thread, input shapes and dtypes, Python
stack and module path.  Around the op it pushes the op's id as msPTI's
external correlation id, so the API records of the launches it makes
(and through their correlation id, the kernels) name the op.  Nothing is
installed when no profile asks: the mode is popped and the hooks removed
when the window ends.

Backward: a forward op that autograd records gets a sequence number;
the node it created gets pre/post hooks that open and close an
``autograd::engine::evaluate_function: <Node>`` range carrying the same
number, so backward ops link to their forward as in torch.profiler.
"""

import itertools
import json
import os
import sys
import threading
import time
import weakref

from . import _mspti


def _clock_env(name, default=0):
    # The clock test hooks of every host clock read of msPTI's
    # (lib/util.h, doc/cluster.md "Clocks").
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


_SKEW_NS = _clock_env("MSPTI_TEST_CLOCK_SKEW_NS")
_DRIFT_PPB = _clock_env("MSPTI_TEST_CLOCK_DRIFT_PPB")
if not -10**9 < _DRIFT_PPB < 10**9:
    _DRIFT_PPB = 0
_DRIFT_T0_NS = (_clock_env("MSPTI_TEST_CLOCK_DRIFT_T0_NS", time.time_ns())
                if _DRIFT_PPB else 0)

# Daemon sessions' range messages with shapes (_shapes_message): libmspti's
# MSTX limit (a message is under 255 bytes) and how many distinct ones a
# process sends.
MSTX_MSG_MAX = 255
MAX_SHAPE_MESSAGES = 4096
if _DRIFT_PPB:
    def _tdiv(a, b):
        # C's division, truncated toward zero.
        return a // b if a >= 0 else -(-a // b)

    def _now():
        # As util_realtime_ns(): whole seconds, then the rest.
        t = time.time_ns()
        d = t - _DRIFT_T0_NS
        s = _tdiv(d, 10**9)
        return (t + _SKEW_NS + s * _DRIFT_PPB +
                _tdiv((d - s * 10**9) * _DRIFT_PPB, 10**9))
elif _SKEW_NS:
    def _now():
        return time.time_ns() + _SKEW_NS
else:
    _now = time.time_ns

# Frames of these directories are torch's or ours, not the user's stack.
_SKIP_DIRS = (os.path.dirname(os.path.abspath(__file__)) + os.sep,)


class OpEvent:
    """One framework op or range on the host timeline (times in ns)."""

    __slots__ = ("id", "name", "start", "end", "tid", "parent", "seq",
                 "fwd", "shapes", "dtypes", "stack", "module", "kind",
                 "mem_self", "children_cpu")

    def __init__(self, id, name, start, tid, parent, kind="op"):
        self.id = id
        self.name = name
        self.start = start
        self.end = start
        self.tid = tid
        self.parent = parent
        self.seq = -1           # autograd sequence number (-1: none)
        self.fwd = False        # a backward range: seq is its forward's
        self.shapes = None
        self.dtypes = None
        self.stack = None
        self.module = None
        self.kind = kind        # op | range | backward
        self.mem_self = [0, 0]  # bytes allocated - freed: cpu, npu

    def __repr__(self):
        return "<OpEvent %s %d..%d tid %d>" % (self.name, self.start,
                                              self.end, self.tid)


class ModuleEvent:
    __slots__ = ("path", "start", "end", "tid")

    def __init__(self, path, start, tid):
        self.path, self.start, self.end, self.tid = path, start, start, tid


class MemEvent:
    """A tensor allocation (bytes > 0) or free (bytes < 0)."""

    __slots__ = ("ts", "tid", "bytes", "device", "total", "addr", "op")

    def __init__(self, ts, tid, nbytes, device, total, addr, op):
        self.ts, self.tid, self.bytes = ts, tid, nbytes
        self.device, self.total, self.addr, self.op = device, total, addr, op


def _shape_of(a, torch):
    if isinstance(a, torch.Tensor):
        return list(a.shape), str(a.dtype).replace("torch.", "")
    if isinstance(a, (list, tuple)) and a and \
            isinstance(a[0], torch.Tensor):
        return [list(t.shape) for t in a if isinstance(t, torch.Tensor)], \
            "TensorList"
    if isinstance(a, bool):
        return [], "Scalar"
    if isinstance(a, (int, float)):
        return [], "Scalar"
    if a is None:
        return [], ""
    if isinstance(a, (list, tuple)):
        return [], "ScalarList"
    return [], ""


def _stack(frame):
    out = []
    while frame is not None:
        co = frame.f_code
        fn = co.co_filename
        if not fn.startswith(_SKIP_DIRS) and "/torch/" not in fn:
            out.append("%s(%d): %s" % (fn, frame.f_lineno, co.co_name))
        frame = frame.f_back
    return out


class _Thread(threading.local):
    def __init__(self):
        self.stack = []         # open OpEvents
        self.modules = []       # open (module, path, ModuleEvent)
        self.pending = None     # (seq, outputs) awaiting their grad_fn
        self.quiet = 0          # > 0: inside record_function's own code
        self.tid = threading.get_native_id()


class Observer:
    """Collects OpEvents while installed on one or more threads."""

    def __init__(self, record_shapes=False, with_stack=False,
                 profile_memory=False, emit_mstx=False):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        self.torch = torch
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.profile_memory = profile_memory
        self.events = []
        self.modules = []
        self.mem = []
        self.active = False
        self._ids = itertools.count(1)
        self._seq = itertools.count()
        self._tls = _Thread()
        self._mem_total = {"cpu": 0, "npu": 0}
        self._hooks = []
        self._child_names = {}
        self._threads = set()
        self._rf_orig = None
        self._names = {}
        # For daemon sessions (_session.py): each op is an MSTX range of
        # domain "framework" whose id is the external correlation id.
        self.emit_mstx = emit_mstx
        self._shape_msgs = set()
        self._domain = _mspti.mstx_domain_create("framework") \
            if emit_mstx else None
        obs = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return obs._dispatch(func, args, kwargs or {})

        self._mode = _Mode()

    # -- install / remove -------------------------------------------------
    def install(self):
        """Pushes the mode on this thread; module hooks with with_stack."""
        self.active = True
        tid = threading.get_ident()
        if tid not in self._threads:
            self._mode.__enter__()
            self._threads.add(tid)
        if self.emit_mstx:
            return
        self._patch_record_function(True)
        if self.with_stack and not self._hooks:
            import torch.nn.modules.module as mm
            self._hooks = [
                mm.register_module_forward_pre_hook(self._module_pre),
                mm.register_module_forward_hook(self._module_post)]

    def uninstall(self):
        """Pops the mode from this thread (wherever it is in the stack)
        and removes the hooks; records stop."""
        self._flush_pending()
        self.active = False
        tid = threading.get_ident()
        if tid in self._threads:
            self._threads.discard(tid)
            _remove_mode(self._mode)
        self._patch_record_function(False)
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def take(self):
        """The events recorded so far, which are then forgotten."""
        self._flush_pending()
        ev, mods, mem = self.events, self.modules, self.mem
        self.events, self.modules, self.mem = [], [], []
        return ev, mods, mem

    # -- ranges (record_function, backward nodes) -------------------------
    def open(self, name, kind="range", seq=-1, fwd=False):
        t = self._tls
        parent = t.stack[-1].id if t.stack else 0
        ev = OpEvent(next(self._ids), name, 0, t.tid, parent, kind)
        ev.seq, ev.fwd = seq, fwd
        if t.modules:
            ev.module = t.modules[-1][2].path
        t.stack.append(ev)
        _mspti.ext_push(ev.id)
        ev.start = _now()
        return ev

    def close(self, ev):
        end = _now()
        _mspti.ext_pop()
        t = self._tls
        # Ranges closed out of order (an exception unwound past them)
        # close with this one.
        while t.stack:
            top = t.stack.pop()
            top.end = end
            if self.active:
                self.events.append(top)
            if top is ev:
                break
            _mspti.ext_pop()

    # -- the op ------------------------------------------------------------
    def _shapes_message(self, name, args, kwargs):
        """A daemon session's range message with shapes: the name, a TAB,
        {"Input Dims": [...], "Input type": [...]} as JSON.  MSTX messages
        are under 255 bytes and libmspti keeps each distinct one for the
        life of the process: a longer one drops the types, then the
        shapes; after MAX_SHAPE_MESSAGES distinct ones, new signatures get
        the name alone (dynamic shapes cannot grow the job's memory)."""
        try:
            dims, types = [], []
            for a in list(args) + list(kwargs.values()):
                s, d = _shape_of(a, self.torch)
                dims.append(s)
                types.append(d)
            extras = [json.dumps(e, separators=(", ", ": "), default=str)
                      for e in ({"Input Dims": dims, "Input type": types},
                                {"Input Dims": dims})]
        except Exception:
            # Whatever a tensor's shape is made of (symbolic sizes, nested
            # tensors), the profiled op itself must run: its name alone.
            return name
        msgs = self._shape_msgs
        for extra in extras:
            m = name + "\t" + extra
            if len(m.encode()) < MSTX_MSG_MAX:
                if m in msgs:
                    return m
                if len(msgs) < MAX_SHAPE_MESSAGES:
                    msgs.add(m)
                    return m
                break
        return name

    def _dispatch(self, func, args, kwargs):
        t = self._tls
        if t.pending is not None:
            self._flush_pending()
        if not self.active:
            return func(*args, **kwargs)
        torch = self.torch
        name = self._names.get(func)
        if name is None:
            ns, _, base = func._schema.name.partition("::")
            # record_function's own ops: its range is recorded by the
            # patched __enter__/__exit__.
            name = self._names[func] = "" if ns == "profiler" else \
                ns + "::" + base
        if not name or t.quiet:
            return func(*args, **kwargs)
        if self.emit_mstx:
            msg = self._shapes_message(name, args, kwargs) \
                if self.record_shapes else name
            rid = _mspti.mstx_domain_range_start(self._domain, msg, None)
            _mspti.ext_push(rid)
            try:
                return func(*args, **kwargs)
            finally:
                _mspti.ext_pop()
                _mspti.mstx_domain_range_end(self._domain, rid)
        parent = t.stack[-1].id if t.stack else 0
        ev = OpEvent(next(self._ids), name, 0, t.tid, parent)
        if t.modules:
            ev.module = t.modules[-1][2].path
        if self.record_shapes:
            shapes, dtypes = [], []
            for a in args:
                s, d = _shape_of(a, torch)
                shapes.append(s)
                dtypes.append(d)
            for a in kwargs.values():
                s, d = _shape_of(a, torch)
                shapes.append(s)
                dtypes.append(d)
            ev.shapes, ev.dtypes = shapes, dtypes
        if self.with_stack:
            ev.stack = _stack(sys._getframe(2))
        grad = False
        if torch.is_grad_enabled():
            for a in args:
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    grad = True
                    break
                if isinstance(a, (list, tuple)) and any(
                        isinstance(x, torch.Tensor) and x.requires_grad
                        for x in a):
                    grad = True
                    break
        if grad:
            ev.seq = next(self._seq)
        elif t.stack and t.stack[-1].kind == "backward":
            ev.seq, ev.fwd = t.stack[-1].seq, True
        t.stack.append(ev)
        _mspti.ext_push(ev.id)
        ev.start = _now()
        try:
            out = func(*args, **kwargs)
        finally:
            ev.end = _now()
            _mspti.ext_pop()
            if t.stack and t.stack[-1] is ev:
                t.stack.pop()
            self.events.append(ev)
        if self.profile_memory:
            self._allocs(ev, func._schema, out)
        if grad:
            t.pending = (ev.seq, out)
        return out

    def _patch_record_function(self, on):
        # torch.profiler.record_function(name): a range of its own around
        # what it encloses, as torch.profiler shows it (the optimizer's
        # "Optimizer.step#SGD.step" is one).
        import torch.autograd.profiler as ap
        cls = ap.record_function
        if on and self._rf_orig is None:
            self._rf_orig = (cls.__enter__, cls.__exit__)
            enter, exit_ = self._rf_orig
            obs = weakref.ref(self)

            def __enter__(rf):
                o = obs()
                if o is None or not o.active:
                    return enter(rf)
                o._tls.quiet += 1
                try:
                    ret = enter(rf)
                finally:
                    o._tls.quiet -= 1
                rf._mspti_ev = o.open(str(rf.name), "range")
                return ret

            def __exit__(rf, *exc):
                o = obs()
                ev = rf.__dict__.pop("_mspti_ev", None)
                if o is not None and ev is not None:
                    o.close(ev)
                if o is None:
                    return exit_(rf, *exc)
                o._tls.quiet += 1
                try:
                    return exit_(rf, *exc)
                finally:
                    o._tls.quiet -= 1
            cls.__enter__, cls.__exit__ = __enter__, __exit__
        elif not on and self._rf_orig is not None:
            cls.__enter__, cls.__exit__ = self._rf_orig
            self._rf_orig = None

    def _flush_pending(self):
        t = self._tls
        p, t.pending = t.pending, None
        if p is None:
            return
        seq, out = p
        torch = self.torch
        outs = out if isinstance(out, (tuple, list)) else (out,)
        # The first output's node is the one the op created (each op
        # autograd records creates its own).
        for o in outs:
            if isinstance(o, torch.Tensor):
                node = o.grad_fn
                if node is not None:
                    self._hook_node(node, seq)
                return

    def _hook_node(self, node, seq):
        obs = weakref.ref(self)
        name = "autograd::engine::evaluate_function: " + node.name()
        box = []

        def pre(grad_outputs):
            o = obs()
            if o is not None and o.active:
                box.append(o.open(name, "backward", seq, True))
            return None

        def post(grad_inputs, grad_outputs):
            o = obs()
            if o is not None and box:
                o.close(box.pop())
            return None
        try:
            node.register_prehook(pre)
            node.register_hook(post)
        except (AttributeError, RuntimeError):
            pass

    # -- memory ------------------------------------------------------------
    def _allocs(self, ev, schema, out):
        torch = self.torch
        outs = out if isinstance(out, (tuple, list)) else (out,)
        rets = schema.returns
        for i, o in enumerate(outs):
            if not isinstance(o, torch.Tensor):
                continue
            if i < len(rets) and rets[i].alias_info is not None:
                continue        # a view or the in-place operand
            n = o.numel() * o.element_size()
            if n <= 0:
                continue
            dev = "npu" if o.is_meta else "cpu"
            self._mem(n, dev, id(o), ev)
            try:
                weakref.finalize(o, self._freed, n, dev, id(o))
            except TypeError:
                pass

    def _mem(self, n, dev, addr, ev):
        self._mem_total[dev] += n
        self.mem.append(MemEvent(_now(), self._tls.tid, n, dev,
                                 self._mem_total[dev], addr,
                                 ev.id if ev is not None else 0))
        if ev is not None:
            ev.mem_self[0 if dev == "cpu" else 1] += n

    def _freed(self, n, dev, addr):
        if not self.active:
            return
        t = self._tls
        ev = t.stack[-1] if t.stack else None
        self._mem(-n, dev, addr, ev)

    # -- modules ------------------------------------------------------------
    def _module_pre(self, module, inputs):
        # The path of a module is its attribute names from the outermost
        # module called (layer1.0.conv1); the outermost is its class name.
        t = self._tls
        if not self.active:
            return None
        if t.modules:
            parent, ppath, _ = t.modules[-1]
            names = self._child_names.get(id(parent))
            if names is None:
                names = {id(m): n for n, m in parent._modules.items()
                         if m is not None}
                self._child_names[id(parent)] = names
            name = names.get(id(module)) or type(module).__name__
            path = ppath + "." + name if ppath else name
        else:
            path = ""
        me = ModuleEvent(path or type(module).__name__, _now(), t.tid)
        t.modules.append((module, path, me))
        return None

    def _module_post(self, module, inputs, output):
        t = self._tls
        while t.modules:
            m, path, me = t.modules.pop()
            me.end = _now()
            if self.active:
                self.modules.append(me)
            if m is module:
                break
        return None


def _remove_mode(mode):
    """Pops mode from this thread's dispatch-mode stack, keeping the modes
    pushed after it."""
    from torch.utils import _python_dispatch as pd
    stack = pd._get_current_dispatch_mode_stack()
    if mode not in stack:
        return
    above = []
    while True:
        top = pd._pop_mode()
        if top is mode:
            break
        above.append(top)
    for m in reversed(above):
        pd._push_mode(m)

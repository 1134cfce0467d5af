"""Framework ops for daemon sessions: ``msptictl start --pid N --kinds op``.

A session asking for "op" sets bit 13 (MSPTI_ACTIVITY_KIND_COUNT) of the
kinds libmspti keeps for it (msptiExtSessionKinds).  A watcher thread,
started when PyTorch is in use with libmspti interposing, polls that
flag (a load and a sleep, every 0.2 s).  While it is set, a global module
forward pre-hook pushes an observer on each thread that calls a module;
the observer records every aten op as an MSTX range of domain
"framework" (host start and end, thread; with "shapes", bit 14, the
message is the name, a TAB and the input shapes and dtypes as JSON) and
pushes the range id as
external correlation id around it, so the session's trace links each
launch, and so each kernel, to the op.  When the session ends the
observer stands aside and each thread pops it at its next module call;
then the hook goes too.  Nobody asking: no hook, no mode, no cost but
the poll.  ``MSPTI_OP_WATCH=0`` turns the watcher off.
"""

import os
import sys
import threading

from . import _mspti

OP_BIT = 1 << 13
SHAPES_BIT = 1 << 14    # --kinds shapes: op, with input shapes and dtypes
POLL_S = 0.2

_lock = threading.Lock()
_watcher = None


class _State:
    def __init__(self):
        self.on = False
        self.obs = None
        self.hook = None
        self.threads = set()


_st = _State()


def _wanted():
    """(ops wanted, shapes wanted)."""
    try:
        k = _mspti.session_kinds()
    except Exception:   # noqa: BLE001 - an old libmspti: never wanted
        return False, False
    return bool(k & OP_BIT), bool(k & SHAPES_BIT)


def _attach(module, inputs):
    # Runs on the thread calling a module: install or drop the observer
    # here, where the dispatch mode's per-thread stack can be changed.
    st = _st
    tid = threading.get_ident()
    if st.on and st.obs is not None:
        if tid not in st.threads:
            st.obs.install()
            st.threads.add(tid)
    elif tid in st.threads:
        st.obs.uninstall()
        st.threads.discard(tid)
    return None


def _set(on, shapes=False):
    st = _st
    if st.obs is not None:
        st.obs.record_shapes = shapes
    if on == st.on:
        return
    import torch.nn.modules.module as mm
    if on:
        if st.obs is None:
            from ._observer import Observer
            st.obs = Observer(emit_mstx=True, record_shapes=shapes)
        st.obs.active = True
        st.on = True
        if st.hook is None:
            st.hook = mm.register_module_forward_pre_hook(_attach)
    else:
        st.on = False
        if st.obs is not None:
            # Pass-through until each thread drops it (_attach).
            st.obs.active = False
        if not st.threads and st.hook is not None:
            st.hook.remove()
            st.hook = None


def _loop():
    import time
    while True:
        time.sleep(POLL_S)
        if "torch" not in sys.modules:
            continue
        want, shapes = _wanted()
        with _lock:
            _set(want, shapes)
            st = _st
            if not st.on and not st.threads and st.hook is not None:
                st.hook.remove()
                st.hook = None


def start_watcher():
    """Starts the watcher once per process (a daemon thread)."""
    global _watcher
    if os.environ.get("MSPTI_OP_WATCH", "1") == "0":
        return
    with _lock:
        if _watcher is not None and _watcher.is_alive():
            return
        _watcher = threading.Thread(target=_loop, name="mspti-op-watch",
                                    daemon=True)
        _watcher.start()


def _after_fork():
    global _watcher
    _watcher = None
    _st.__init__()


os.register_at_fork(after_in_child=_after_fork)

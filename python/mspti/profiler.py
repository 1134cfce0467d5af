"""torch.profiler's names over mspti.Profile, so programs written for
torch.profiler or torch_npu.profiler run with the import line changed:

    from mspti.profiler import profile, record_function, ProfilerActivity
    import mspti.npusim.torch as torch_npu     # torch_npu.profiler.profile

``profile`` is mspti.Profile (a context manager, start()/stop()/step(),
and a decorator); ``schedule``, ``tensorboard_trace_handler``,
``record_function``, ``ProfilerActivity`` and ``ProfilerAction`` are
mspti's.  ``ExperimentalConfig`` / ``_ExperimentalConfig`` accept
torch_npu's keyword arguments and change nothing.
"""

from ._profile import (Profile as profile, ProfilerAction, ProfilerActivity,
                       Schedule, record_function, schedule,
                       tensorboard_trace_handler)

__all__ = ["profile", "ProfilerAction", "ProfilerActivity", "Schedule",
           "record_function", "schedule", "tensorboard_trace_handler",
           "ExperimentalConfig", "supported_activities"]


class ExperimentalConfig:
    """torch_npu.profiler._ExperimentalConfig: accepted, not used (the
    msPTI capture has one level: everything it can see)."""

    def __init__(self, **kwargs):
        self.options = dict(kwargs)


_ExperimentalConfig = ExperimentalConfig


class ProfilerLevel:
    """torch_npu.profiler.ProfilerLevel's names (not used)."""
    Level0, Level1, Level2 = "Level0", "Level1", "Level2"


class AiCMetrics:
    """torch_npu.profiler.AiCMetrics's names (not used)."""
    PipeUtilization = "PipeUtilization"
    ArithmeticUtilization = "ArithmeticUtilization"
    Memory = "Memory"


def supported_activities():
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}

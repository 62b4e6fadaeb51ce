"""The exceptions gpipe raises; every one is a :class:`GpipeError`."""

from collections.abc import Sequence

__all__ = ["GpipeError", "GpipeValueError", "GpipeFileError", "DeviceUnavailableError", "TaskError",
           "WorkerLostError"]


class GpipeError(Exception):
    """Base class of every error gpipe raises on purpose."""


class GpipeValueError(GpipeError, ValueError):
    """A parameter broke a rule; the message names the parameter, the rule and the value."""


class GpipeFileError(GpipeError, ValueError):
    """An input file is malformed; the message names the file and the line."""

    def __init__(self, path, line: int | None, reason: str):
        self.path, self.line, self.reason = str(path), line, reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):
        return (type(self), (self.path, self.line, self.reason))


class DeviceUnavailableError(GpipeError, RuntimeError):
    """A GPU was asked for and none is usable; the message says what is missing."""


class TaskError(GpipeError, RuntimeError):
    """A worker task failed; the message names the phase, superstep and partition."""

    def __init__(self, phase: str, partition: int, superstep: int | None, cause: str, unit: str = "partition"):
        self.phase, self.partition, self.superstep, self.cause, self.unit = phase, partition, superstep, cause, unit
        step = f" superstep {superstep}," if superstep is not None else ""
        super().__init__(f"{phase} failed in{step} {unit} {partition}: {cause}")

    def __reduce__(self):
        return (type(self), (self.phase, self.partition, self.superstep, self.cause, self.unit))


class WorkerLostError(GpipeError, RuntimeError):
    """A worker holding graph partitions or a run's data left the cluster during a run; what it held is lost.

    ``out_of_memory`` names those of ``workers`` known to have been restarted for running out of memory.
    """

    def __init__(self, phase: str, workers: list[str], partitions: list[int], unit: str = "partition",
                 out_of_memory: Sequence[str] = ()):
        self.phase, self.workers, self.partitions, self.unit = phase, workers, partitions, unit
        self.out_of_memory = list(out_of_memory)
        many = len(partitions) > 1
        why = ""
        if self.out_of_memory:
            why = f" ({'it' if len(workers) == 1 else ', '.join(self.out_of_memory)} ran out of memory)"
        super().__init__(f"{phase}: worker {', '.join(workers)} left the cluster{why}; {unit}{'s' * many} "
                         f"{', '.join(map(str, partitions))} it held (graph and run data) {'are' if many else 'is'} "
                         "lost, so the run stops rather than finish without them — load or build the graph again "
                         "and rerun")

    def __reduce__(self):
        return (type(self), (self.phase, self.workers, self.partitions, self.unit, self.out_of_memory))

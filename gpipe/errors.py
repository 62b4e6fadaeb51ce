"""The exceptions gpipe raises; every one is a :class:`GpipeError`."""

__all__ = ["GpipeError", "GpipeValueError", "GpipeFileError", "DeviceUnavailableError", "TaskError"]


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

"""Errors that say whose fault they are (ARCHITECTURE.md, decision 6)."""

from __future__ import annotations


class DevicefarmError(Exception):
    """Base of every error the project raises on purpose."""

    #: Whether the farm may retry the job (on another device) after this error.
    retryable = False


class ModelError(DevicefarmError):
    """The model is malformed, too large, or uses an op or version we do not have.

    The user's input is at fault; retrying elsewhere will not help.
    """


class DeviceError(DevicefarmError):
    """A device or its driver failed (lost device, driver error, out of resources).

    Infrastructure is at fault; the job may be retried on another matching device.
    """

    retryable = True


class JobError(DevicefarmError):
    """A job specification is invalid (bad configuration, selector, inputs)."""


class JobTimeout(JobError):
    """A job's tool ran past its deadline and was stopped: the job ends `timed_out`, is
    not retried, and `log` keeps what the tool printed before it was stopped."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class UsageError(DevicefarmError):
    """The command line (or the environment standing for it) names something unusable:
    a farm that does not exist, a setting that cannot work. The CLI exits 2, as argparse
    does for its own usage errors, before any work starts."""

"""The calibration profile: the fitted costs of one model on one hardware entry under one framework, as a
versioned YAML file that ``simulate``, ``serve`` and ``compare`` read (``SimConfig.profile``).

It carries what a user needs to judge it besides the values: the priors they replaced, the points it was
fitted on, every point's error before and after, and how the fit went (:class:`FitInfo`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec
import yaml

import scoville
from scoville.errors import UserError
from scoville.sim.frameworks import FrameworkCosts, load_framework
from scoville.sim.measured import Figures, Role

SCHEMA_VERSION = 1
PROFILE_KIND = "scoville-calibration-profile"


class ProfileError(UserError):
    """A profile file that cannot be read or used; message is user-facing."""


class PointError(msgspec.Struct, kw_only=True, frozen=True):
    """One load point: measured figures and the prediction before and after calibration."""

    run_id: str
    label: str
    workload: str
    role: Role
    measured: Figures
    before: Figures
    after: Figures
    measured_rse: dict[str, float] = {}    # per metric, the relative standard error of the measured mean (passes)

    def error(self, stage: str, metric: str) -> float | None:
        """Relative error (predicted ÷ measured − 1) of ``stage`` (before/after) on ``metric``."""
        pred = getattr(self, stage).get(metric)
        meas = self.measured.get(metric)
        if pred is None or meas is None or meas <= 0:
            return None
        return pred / meas - 1.0


class FitPoint(msgspec.Struct, kw_only=True, frozen=True):
    run_id: str
    label: str


class FitInfo(msgspec.Struct, kw_only=True, frozen=True):
    """How the fit went: evaluations, losses, the parameters the points could not determine."""

    method: str
    metrics: list[str]
    evaluations: int
    loss_before: float
    loss_after: float
    observations: int
    kernel_prior_sd: float = 0.0     # kernel_factor's prior width in log space (kernel_prior_sd; 0: not recorded)
    spread: dict[str, float] = {}    # log-space standard deviation of each fitted parameter
    undetermined: list[str] = []     # parameters the fit points do not pin within a factor of 2
    at_bound: list[str] = []         # parameters that ended on one of their BOUNDS
    left_out: list[str] = []         # invalid passes of the runs, neither fitted nor judged (RUN:LABEL (codes))


def _check_finite(name: str, value: float, *, zero_ok: bool) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and (value > 0 or zero_ok and value == 0)):
        raise ValueError(f"{name} must be a finite number {'>=' if zero_ok else '>'} 0, got {value!r}")


class Profile(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A calibration of one model on one hardware entry under one serving framework.

    ``kernel_factor`` is the whole multiplier on kernel times (the framework prior's ``kernel_scale`` is
    folded in, so :meth:`framework_costs` carries ``kernel_scale`` 1); prefill kernels run at
    ``prefill_kernel_ratio`` times it, the fitted ``prefill_kernel_factor / kernel_factor`` (a profile written
    before the prefill factor was fitted, 2026-12-07, holds the framework prior's). ``sigma`` is
    the fit's residual spread in log space (degrees of freedom counted), which becomes the host-cost
    uncertainty of every step.
    """

    schema_version: int
    kind: str = PROFILE_KIND
    hardware: str
    model: str
    framework: str
    kernel_factor: float
    step_overhead_us: float
    seq_overhead_us: float
    request_overhead_ms: float
    sigma: float
    prefill_kernel_ratio: float = 1.0     # prompt tokens' kernels over decoding tokens' (fitted)
    prior: dict[str, float] = {}
    deployment: dict[str, Any] = {}
    fitted_on: list[FitPoint] = []
    points: list[PointError] = []
    fit: FitInfo | None = None
    created: str = ""
    scoville_version: str = ""

    def __post_init__(self) -> None:
        if self.kind != PROFILE_KIND:
            raise ValueError(f"kind is {self.kind!r}, not {PROFILE_KIND!r}")
        _check_finite("kernel_factor", self.kernel_factor, zero_ok=False)
        _check_finite("prefill_kernel_ratio", self.prefill_kernel_ratio, zero_ok=False)
        for name in ("step_overhead_us", "seq_overhead_us", "request_overhead_ms", "sigma"):
            _check_finite(name, getattr(self, name), zero_ok=True)

    def framework_costs(self) -> FrameworkCosts:
        """The fitted host costs, in the form the cost model takes in place of the framework's priors (the
        kernel structure, its elementwise kernel count and shared-expert overlap, stays the framework's: the fit
        ran with it, as with the host time a step without an overlap scheduler adds; so does the disaggregated
        handover, which the unified runs a profile is fitted on cannot show)."""
        runs = sorted({p.run_id for p in self.fitted_on})
        prior = load_framework(self.framework)
        return msgspec.structs.replace(
            prior, step_overhead_us=self.step_overhead_us, seq_overhead_us=self.seq_overhead_us,
            request_overhead_ms=self.request_overhead_ms, sigma=self.sigma, kernel_scale=1.0,
            prefill_kernel_ratio=self.prefill_kernel_ratio,
            source=f"calibrated {self.created} on {len(self.fitted_on)} point(s) of {', '.join(runs) or 'no runs'}")

    def check_applies(self, hardware: str, model: str, framework: str) -> None:
        """One-line error when this profile was fitted for another hardware, model or framework.

        Names are compared as the catalogs resolve them (a YAML path and its ``name`` are one system).
        """
        from scoville.catalog.hardware import load_hardware
        from scoville.catalog.models import load_model

        given = {"hardware": load_hardware(hardware).name, "model": load_model(model).name,
                 "framework": load_framework(framework).name}
        for key, value in given.items():
            if value != getattr(self, key):
                raise ProfileError(f"the profile was calibrated for {key} {getattr(self, key)!r}, not {value!r}; "
                                   f"use a profile of {value} or calibrate one with `scoville calibrate`")

    def to_yaml(self) -> str:
        return yaml.safe_dump(msgspec.to_builtins(self), sort_keys=False, allow_unicode=True)

    def write(self, path: Path) -> Path:
        """Write the profile as YAML (atomically: a half-written profile never replaces a good one)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(self.to_yaml())
            tmp.replace(path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise ProfileError(f"cannot write profile {path}: {e.strerror or e}") from None
        return path


def load_profile(path: str | Path) -> Profile:
    """Read a profile written by ``scoville calibrate``; any problem is one line naming the file and the fix."""
    p = Path(path).expanduser()
    hint = "write one with `scoville calibrate RUN... --hardware H -o PROFILE.yaml`"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"profile {p} does not exist; {hint}") from None
    except UnicodeDecodeError:
        raise ProfileError(f"{p}: not a text file, so not a calibration profile; {hint}") from None
    except OSError as e:
        raise ProfileError(f"cannot read profile {p}: {e.strerror or e}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ProfileError(f"{p}:{where} is not valid YAML ({getattr(e, 'problem', e)}); {hint}") from None
    if not isinstance(raw, dict) or raw.get("kind", PROFILE_KIND) != PROFILE_KIND:
        raise ProfileError(f"{p}: not a calibration profile (expected a mapping with kind: {PROFILE_KIND}); {hint}")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ProfileError(f"{p}: profile schema_version {version!r}, this scoville {scoville.__version__} reads "
                           f"{SCHEMA_VERSION}; recalibrate with `scoville calibrate` on the same runs")
    try:
        return msgspec.convert(raw, Profile, strict=False)
    except msgspec.ValidationError as e:
        msg = str(e).replace("$.", "field ")
        raise ProfileError(f"{p}: malformed profile ({msg}); {hint}") from None
    except ValueError as e:
        raise ProfileError(f"{p}: malformed profile ({e}); {hint}") from None

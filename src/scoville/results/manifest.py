"""The run manifest: everything needed to recompute and judge a run, no secrets (docs/architecture.md, 4).

``Manifest`` is the typed form of ``manifest.json``. Field names are the JSON's keys, so a manifest written
before these types existed reads into them, and one written now (no key whose value is None) reads in older
tools. Keys this version does not know are dropped on read; ``RunWriter.resume`` refuses a manifest of a newer
schema version rather than rewrite it without them. Sections whose shape
belongs to another module (a simulator configuration, a workload's own description, an executor's report) are
held as ``JsonObject``: the manifest records them for provenance and hands them back to their owner whole.
"""

from __future__ import annotations

import platform
import re
import socket
import sys
from importlib import metadata
from typing import Annotated, Any

import msgspec

import scoville
from scoville.load import LoadPoint
from scoville.results.schema import SCHEMA_VERSION, PointOutcome

_SECRET_KEYS = re.compile(
    r"^(api[_-]?key|authorization|password|secret|bearer|token|\w*_(secret|password)|\w*access_token|hf_token)$", re.I
)
# scheme://user:pass@host -> scheme://host wherever a URL appears in text (a --url on the command line).
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")
_PACKAGES = ("aiohttp", "numpy", "pyarrow", "duckdb", "msgspec", "uvloop", "ray", "nvidia-ml-py")
_INT32_MAX = 2**31 - 1

# A JSON object whose keys and values another module defines (see the module docstring).
JsonObject = dict[str, object]
_Positive = Annotated[int, msgspec.Meta(ge=1, le=_INT32_MAX)]


class Emulator(msgspec.Struct, kw_only=True):
    """The built-in emulator a sweep without ``--url`` measured, enough to start it again on a resume."""

    hardware: str
    model: str
    config: JsonObject | None = None      # the emulator's simulator configuration (sim.config.SimConfig)


class Target(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What was measured or simulated. A measured run fills the client's fields (``ClientConfig`` less its
    secrets, plus what the probe found), a simulated run the simulator's; unset fields are not written."""

    # measured: the OpenAI-compatible endpoint
    base_url: str | None = None
    model: str | None = None
    api: str | None = None
    ignore_eos: bool | None = None
    extensions: bool | None = None
    timeout_s: float | None = None
    read_timeout_s: float | None = None
    vocab_size: int | None = None
    tokenizer: str | None = None
    prompt_words_checked: int | None = None
    endpoint: str | None = None
    models_served: list[str] | None = None
    max_model_len: int | None = None
    emulator: Emulator | None = None
    # simulated: the configuration, how its step times were costed, and the estimator's figures
    simulator: JsonObject | None = None           # sim.config.SimConfig, dumped
    fidelity: str | None = None                   # discrete-event | analytic
    cost_model: JsonObject | None = None          # per-operator provenance of the step costs (sim.cost)
    search: JsonObject | None = None              # the configuration search's summary (sim.search)
    predictions: list[JsonObject] | None = None   # each point's steady-state estimate and band (sim.analytic)
    track_record: str | None = None               # how often such predictions were right (sim.track_record)


class System(msgspec.Struct, kw_only=True):
    """The deployment measured: what per-accelerator and per-kW figures divide by."""

    hardware: str | None = None
    accelerators: _Positive | None = None
    rated_watts_per_accelerator: float | None = None
    power_boundary: str | None = None
    cost_per_accelerator_hour: float | None = None
    cost_preset: str | None = None


class Model(msgspec.Struct, kw_only=True):
    """The model as the target named it (a simulated run adds its catalog precision)."""

    name: str | None = None
    precision: str | None = None


class Serving(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The serving stack; a measured run knows only what the user told it, so all of it is optional."""

    framework: str | None = None
    version: str | None = None
    parallelism: dict[str, int] | None = None
    config_label: str | None = None
    options: JsonObject | None = None             # the simulator's full configuration


class PlannedPoint(LoadPoint, kw_only=True, frozen=True):
    """One point of the load plan: the load, its label, and (simulated runs) the configuration that served it."""

    label: str | None = None
    config: JsonObject | None = None              # the point's own SimConfig (a config search's winner)
    accelerators: _Positive | None = None         # that configuration's size, when it differs per point

    def load_point(self) -> LoadPoint:
        """The load alone, as the drivers take it."""
        return msgspec.convert(msgspec.to_builtins(self), LoadPoint)


class LoadPlan(msgspec.Struct, kw_only=True):
    """The points a run set out to measure, with the seed that fixes their prompts and arrivals."""

    points: list[PlannedPoint] = []
    seed: int | None = None
    mode: str | None = None                       # concurrency | rate (measured runs)
    workers: int | None = None                    # client processes (measured runs)


class EnergyCount(msgspec.Struct, kw_only=True):
    """Joules per device that NVML's energy counter gained over one point."""

    point: int
    t_start: float
    t_end: float
    joules: dict[str, float]


class Power(msgspec.Struct, kw_only=True):
    """Where the power figures come from: a provisioned figure (rated, all-in, model) or samples (nvml, csv)."""

    source: str = "none"
    boundary: str | None = None
    watts_per_accelerator: float | None = None
    csv_path: str | None = None
    nvml_devices: list[int] | None = None
    nvml_device_names: list[str] | None = None
    energy_counter: list[EnergyCount] | None = None


class Environment(msgspec.Struct, kw_only=True):
    """Where the run ran (host, platform, package versions): to tell two runs' software apart."""

    host: str | None = None
    platform: str | None = None
    python: str | None = None
    packages: dict[str, str] = {}


class ClockSegment(msgspec.Struct, kw_only=True):
    """Where one writer session's run clock sits on the wall clock (``t`` run seconds at ``unix``)."""

    t: float
    unix: float


class Clock(msgspec.Struct, kw_only=True):
    """How the run's clock maps to wall time, one segment per attempt (a resume starts a segment)."""

    segments: list[ClockSegment] = []


class ServerMetrics(msgspec.Struct, kw_only=True):
    """How the server's Prometheus /metrics were scraped during the run."""

    path: str | None = None
    interval_s: float = 1.0
    status: str | None = None


class Manifest(msgspec.Struct, kw_only=True):
    """``manifest.json``. Written whole by ``results.store.RunWriter`` at the start of a run, after each
    point, and at the end; every field has a default, so manifests of every schema version read."""

    scoville_version: str | None = None
    source: str | None = None                     # measured | simulated (``source_label`` adds "emulated")
    target: Target = msgspec.field(default_factory=Target)
    system: System = msgspec.field(default_factory=System)
    model: Model = msgspec.field(default_factory=Model)
    serving: Serving = msgspec.field(default_factory=Serving)
    # The workload's own description (workload.*.to_dict), which each workload kind rebuilds itself from on a
    # resume; only ``name`` and ``kind`` are read here (``workload_name``).
    workload: JsonObject = {}
    load_plan: LoadPlan = msgspec.field(default_factory=LoadPlan)
    power: Power = msgspec.field(default_factory=Power)
    compat: str = "inferencex"
    slo: dict[str, float] = {}
    environment: Environment = msgspec.field(default_factory=Environment)
    command: list[str] = []
    run_id: str | None = None
    schema_version: int = 1                       # absent only in runs from before it was written: 1
    created_at: str | None = None
    status: str | None = None
    resumed_at: list[str] | None = None
    clock: Clock | None = None
    executor: JsonObject | None = None            # what ran the points (executor.describe()), as it reports itself
    slo_search: JsonObject | None = None          # an SLO search's summary (slo_search.SloSearch.summary)
    server_metrics: ServerMetrics | None = None
    point_results: dict[str, PointOutcome] | None = None
    finished_at: str | None = None
    files: dict[str, str] | None = None           # sha256 of each data file, written when the run finishes

    @property
    def workload_name(self) -> str | None:
        """The workload's name as the catalog and the report show it (the workload section is its owner's)."""
        name = self.workload.get("name")
        return None if name is None else str(name)

    def point_outcome(self, point: int) -> PointOutcome | None:
        """How the latest attempt at ``point`` went; None for simulated runs and runs from before it was kept."""
        return (self.point_results or {}).get(str(point))

    def to_json(self) -> bytes:
        """The file's bytes: indented, keys in field order, and no key whose value is None. Absent and null read
        the same here, while older scoville versions tested keys for presence (``"slo_search" in manifest``)."""
        return msgspec.json.format(msgspec.json.encode(_without_nones(msgspec.to_builtins(self))), indent=2) + b"\n"


def _without_nones(value: Any) -> Any:
    """``value`` with every mapping entry whose value is None left out, at any depth (list items are kept)."""
    if isinstance(value, dict):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nones(v) for v in value]
    return value


def scrub(value: Any) -> Any:
    """Drop secret-looking keys and URL credentials anywhere in a nested structure (secrets never reach disk)."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if _SECRET_KEYS.search(str(k)) and v else scrub(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    if isinstance(value, str) and "@" in value:
        return _USERINFO.sub(r"\1", value)
    return value


def environment() -> Environment:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return Environment(host=socket.gethostname(), platform=platform.platform(), python=sys.version.split()[0],
                       packages=versions)


def decode_manifest(raw: object) -> Manifest:
    """``raw`` (parsed JSON) as a Manifest; ``msgspec.ValidationError`` names the first field that is not what
    the schema says. Keys this version does not know are dropped: the schema only grows."""
    return msgspec.convert(raw, Manifest)


def base_manifest(
    *,
    source: str,
    target: JsonObject,
    system: JsonObject,
    model: JsonObject,
    serving: JsonObject,
    workload: JsonObject,
    load_plan: JsonObject,
    power: JsonObject,
    compat: str = "inferencex",
    slo: dict[str, float] | None = None,
    command: list[str] | None = None,
) -> Manifest:
    """A new run's manifest; ``source`` is "measured" or "simulated".

    The sections come as the plain mappings their owners produce (``ClientConfig.to_manifest``,
    ``PowerPlan.manifest``, a workload's ``to_dict``) and are checked into their types here, after every
    secret-looking key and URL credential is scrubbed out of them.
    """
    if source not in ("measured", "simulated"):
        raise ValueError(f"source must be 'measured' or 'simulated', not {source!r}")
    raw = {
        "scoville_version": scoville.__version__, "source": source, "target": target, "system": system,
        "model": model, "serving": serving, "workload": workload, "load_plan": load_plan, "power": power,
        "compat": compat, "slo": slo or {}, "environment": msgspec.to_builtins(environment()),
        "command": command or sys.argv, "schema_version": SCHEMA_VERSION,
    }
    return decode_manifest(scrub(raw))


def source_label(manifest: Manifest) -> str:
    """What a run is, as every listing names it: ``simulated``, ``emulated`` (measured against scoville's built-in
    emulator: a real client over real HTTP, but the server's timing is the simulator's) or ``measured``."""
    if manifest.source == "simulated":
        return "simulated"
    return "emulated" if manifest.target.emulator is not None else str(manifest.source)

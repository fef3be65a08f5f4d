"""The gateway's one settings class: TOML file < environment (COMFY_GATEWAY_*) < flags.

Read once at the entry point (`gateway.serve`) and passed down; library modules never read
the environment themselves.
"""

from __future__ import annotations

import dataclasses
import re
import socket
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from gateway.ledger.experiments import Experiment
from gateway.scheduler import DEFAULT_POLICY
from gateway.scheduler.policy import make_policy
from workers.comfy.launch_args import FlagError, check_args
from workers.comfy.modelfolders import model_folder
from workers.gpus import parse_gpu_slots
from workers.supervision.emulator_options import split_emulator_options
from workers.supervision.launch import WorkerSpec
from workers.supervision.logs import MIB
from workers.supervision.restart import RestartSettings
from workers.supervision.worker import SupervisionSettings
from workers.warmup.prompts import PROBE_STEPS

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DEFAULT_EMULATED = 2
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class WorkerConfig(BaseModel):
    """One worker of the farm: a real ComfyUI (`gpu`) or an emulated one (`emulate`).

    `url` names an instance that is already running and that the gateway does not start.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    group: str = "default"
    gpu: int | str | None = None
    """A GPU index, or a slot of several ("0+1" or "0,1": CUDA_VISIBLE_DEVICES=0,1)."""
    args: tuple[str, ...] = ()
    python: str | None = None
    comfyui: Path | None = None
    emulate: str | None = None
    checkpoints: tuple[str, ...] = ()
    models: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """An emulated worker's files of other model folders (`{vae = ["ae.safetensors"]}`);
    a folder not named keeps the emulator's default files."""
    url: str | None = None
    port: int | None = None
    preload: tuple[str, ...] | None = None
    """Checkpoints to warm up before it takes client jobs; None: the farm's `preload`."""

    @field_validator("gpu", mode="before")
    @classmethod
    def _one_slot(cls, value: Any) -> Any:
        return _slot(value) if isinstance(value, str) else value

    @field_validator("models")
    @classmethod
    def _known_folders(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        return model_folders(value)

    @model_validator(mode="after")
    def _args_can_work(self) -> WorkerConfig:
        # Refused here, at start, with ComfyUI's own reason, not as a worker that never comes up.
        args = split_emulator_options(list(self.args)) if self.emulated else list(self.args)
        try:
            check_args(args)
        except FlagError as exc:
            raise ValueError(f"worker {self.name}: {exc}") from None
        return self

    @field_validator("name")
    @classmethod
    def _name_is_path_safe(cls, value: str) -> str:
        # The name namespaces the worker's output files in /view, so it must be one path part.
        if not NAME_RE.match(value):
            raise ValueError(f"worker name {value!r} must match {NAME_RE.pattern}")
        return value

    @property
    def emulated(self) -> bool:
        return self.emulate is not None

    def spec(self) -> WorkerSpec:
        """This worker as `workers` runs it. The fields are `WorkerSpec`'s, read by name (a
        test holds the two field lists equal); only two change form: `models` becomes
        (folder, files) pairs and an unset `preload` none."""
        same = {f.name: getattr(self, f.name) for f in dataclasses.fields(WorkerSpec)}
        reshaped = {"models": tuple(self.models.items()), "preload": self.preload or ()}
        return WorkerSpec(**(same | reshaped))


class RestartConfig(BaseModel):
    """`[restart]`: backoff after a crash, and when to give up (`workers.supervision.restart`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backoff_initial_s: float = 1.0
    backoff_factor: float = 2.0
    backoff_max_s: float = 60.0
    stable_after_s: float = 300.0
    max_start_failures: int = 3
    flap_exits: int = 5
    flap_window_s: float = 120.0

    @model_validator(mode="after")
    def _sane(self) -> RestartConfig:
        self.policy()
        return self

    def policy(self) -> RestartSettings:
        """Raises ValueError for settings that cannot work."""
        return RestartSettings(**self.model_dump())


class Settings(BaseSettings):
    """Everything `comfy-gateway serve` can be told."""

    model_config = SettingsConfigDict(
        env_prefix="COMFY_GATEWAY_", extra="forbid", populate_by_name=True
    )

    config: Path | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8188, ge=0, le=65535)
    """0: any free port (the log says which)."""
    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("redis_url", "COMFY_GATEWAY_REDIS_URL", "REDIS_URL"),
    )
    redis_prefix: str = "cg"
    redis_max_connections: int = Field(default=64, ge=1)
    """Connections this node opens to Redis (each of its two pools); more concurrent commands
    wait for one, up to `redis_pool_timeout_s`."""
    redis_pool_timeout_s: float = Field(default=10.0, gt=0)
    node_url: str | None = None
    """Where the other gateway nodes reach this one (`/view` of its files, uploads,
    interrupts); default `http://HOST:PORT`, with this host's name for a wildcard HOST."""
    node_ttl_s: float = Field(default=10.0, gt=0)
    """A node that has not renewed its registration for this long has left the farm: the
    other nodes stop counting its workers and put back in the queue what they held."""
    data_dir: Path = Path(".data")
    appendfsync: str = "everysec"
    emulate: int | None = Field(default=None, ge=1)
    emulate_profile: str = "rtx4070ti"
    emulate_checkpoints: tuple[str, ...] = ()
    emulate_models: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Emulated workers' files of other model folders, by folder (as `WorkerConfig.models`)."""
    time_scale: float = Field(default=1.0, gt=0)
    comfyui: Path | None = None
    comfyui_python: str | None = None
    gpus: tuple[int | str, ...] | None = None
    policy: str = DEFAULT_POLICY
    workers: tuple[WorkerConfig, ...] = ()
    experiments: tuple[Experiment, ...] = ()
    """A/B experiments (`[[experiments]]`: name, groups, weights, shapes)."""
    preload: tuple[str, ...] = ()
    auth_token: str | None = None
    front_end_root: Path | None = None
    """The web frontend's folder; None: the installed `comfyui-frontend-package`."""

    max_body_mib: float = 100.0
    max_prompt_mib: float = 10.0
    """Largest `POST /prompt` body (413 past it): a prompt is stored twice (its job and its
    history entry), so this bounds what one request can take of Redis' memory."""
    header_timeout_s: float = Field(default=10.0, gt=0)
    """A request head (request line and headers) must arrive within this of its first byte,
    else the connection is closed: a client dribbling headers cannot hold it."""
    keep_alive_timeout_s: float = Field(default=5.0, gt=0)
    """An idle keep-alive connection is closed after this (uvicorn's `timeout_keep_alive`)."""
    max_header_kib: int = Field(default=64, ge=1)
    """Largest request head (h11's `max_incomplete_event_size`); 400 past it."""
    max_job_work: float = Field(default=16 * 64 * 150, gt=0)
    """Work units per job, summed over its sampler nodes: megapixels x batch x steps (default:
    16 MP x batch 64 x 150 steps). A prompt past it is refused at `POST /prompt` with 400."""
    redis_maxmemory_mib: int = 1024
    """The embedded Redis' `maxmemory`, with `noeviction`: when full it refuses new prompts
    (503) and never evicts a job; 0 = no cap. Not applied to a Redis given by URL."""
    max_attempts: int = 3
    quarantine_after_crashes: int = Field(default=2, ge=1)
    """A job that crashed its worker this many times (it was running each time) is
    quarantined: never run again, its record and workflow kept at /gateway/jobs/{id}."""
    lease_s: float = 30.0
    stall_timeout_s: float = 600.0
    """Watchdog: a worker holding jobs that sends no event for this long is probed."""
    interrupt_grace_s: float = 10.0
    accept_journal_s: float = 10.0
    """Accepted prompts kept in memory this long, to enqueue again if a Redis restart lost
    them (longer than the AOF's one-second fsync window)."""
    worker_start_timeout_s: float = 300.0
    warmup_timeout_s: float = 600.0
    warmup_probe_steps: int = PROBE_STEPS
    """Steps of the speed probe run after each warm-up to seed the worker's speed (0: none)."""
    warm_cold_workers: bool = True
    """A worker started with nothing preloaded warms up, once it sits idle after a job has
    arrived, on a checkpoint clients asked for (`gateway.scheduler.warming`), so that no
    client job pays the card's first use; no speed probe."""
    drain_grace_s: float = 30.0
    stop_grace_s: float = 10.0
    orphan_grace_s: float = Field(default=60.0, ge=0)
    """How long workers outlive a gateway killed without a stop (a crash, kill -9), waiting
    for the next gateway on this data dir to adopt them and the jobs they run."""
    restart: RestartConfig = Field(default_factory=RestartConfig)
    supervise_interval_s: float = 0.25
    telemetry_interval_s: float = 2.0
    worker_log_max_mib: float = 10.0
    worker_log_backups: int = 3
    worker_request_timeout_s: float = 30.0
    liveness_interval_s: float = Field(default=1.0, gt=0)
    """How often each worker's HTTP is probed (`gateway.recovery.liveness`)."""
    liveness_timeout_s: float = Field(default=2.0, gt=0)
    """A worker that does not answer the probe within this leaves the ready set until it
    answers again; farm-wide routes (`/system_stats`, `/models`, ...) wait no longer for one."""
    hang_after_s: float = Field(default=10.0, gt=0)
    """A worker holding jobs that has not answered for this long is hung: restarted."""
    catalog_refresh_s: float = Field(default=60.0, gt=0)
    """How often every worker's object_info (its node classes and file lists) is read again;
    also read on a worker's (re)connect, after an upload, and before refusing a prompt that
    names a file no list has."""
    prefetch: int = 1
    history_max_items: int = 10000
    ledger: bool = True
    """Record each job's phase ledger (`gateway.ledger`); off only to measure what it costs."""
    job_ttl_s: float = 7 * 24 * 3600.0
    idempotency_ttl_s: float = 24 * 3600.0
    log_level: str = "info"

    @field_validator("gpus", mode="before")
    @classmethod
    def _split_gpus(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(_slot(part) for part in value.split(","))
        if isinstance(value, int):
            return (value,)
        return value

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        make_policy(value)  # raises UnknownPolicyError, a ValueError, naming the known ones
        return value

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        if value.lower() not in LOG_LEVELS:
            raise ValueError(f"unknown log level {value!r}; known: {', '.join(LOG_LEVELS)}")
        return value.lower()

    @field_validator("emulate_checkpoints", "preload", mode="before")
    @classmethod
    def _split_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("emulate_models")
    @classmethod
    def _known_emulated_folders(
        cls, value: dict[str, tuple[str, ...]]
    ) -> dict[str, tuple[str, ...]]:
        return model_folders(value)

    @field_validator("warmup_probe_steps")
    @classmethod
    def _probe_steps(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"warmup_probe_steps must be 0 (no speed probe) or more, got {value}")
        return value

    @model_validator(mode="after")
    def _gpus_are_for_comfyui(self) -> Settings:
        # Without --comfyui the farm is emulated and would silently leave the GPUs unused.
        if self.gpus is not None and self.comfyui is None:
            raise ValueError(
                "gpus names the GPU slots of real ComfyUI workers: give comfyui (--comfyui PATH,"
                " a ComfyUI checkout) with it; without, the farm is emulated"
            )
        return self

    @model_validator(mode="after")
    def _unique_worker_names(self) -> Settings:
        names = [worker.name for worker in self.workers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate worker names: {', '.join(duplicates)}")
        return self

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mib * 1024 * 1024)

    @property
    def max_prompt_bytes(self) -> int:
        return int(self.max_prompt_mib * 1024 * 1024)

    @property
    def advertised_url(self) -> str:
        """This node's URL for the other nodes (`node_url`, else from `host` and `port`)."""
        if self.node_url:
            return self.node_url.rstrip("/")
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def supervision(self) -> SupervisionSettings:
        return SupervisionSettings(
            start_timeout_s=self.worker_start_timeout_s,
            warmup_timeout_s=self.warmup_timeout_s,
            warmup_probe_steps=self.warmup_probe_steps,
            stop_grace_s=self.stop_grace_s,
            orphan_grace_s=self.orphan_grace_s,
            interval_s=self.supervise_interval_s,
            restart=self.restart.policy(),
            log_max_bytes=max(1, int(self.worker_log_max_mib * MIB)),
            log_backups=self.worker_log_backups,
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        config_path = _config_path(init_settings, env_settings)
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if config_path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_path))
        return tuple(sources)


def _config_path(
    init_settings: PydanticBaseSettingsSource, env_settings: PydanticBaseSettingsSource
) -> Path | None:
    """The TOML file named by the `--config` flag, else by COMFY_GATEWAY_CONFIG."""
    from_init = getattr(init_settings, "init_kwargs", {}).get("config")
    value = from_init if from_init is not None else env_settings().get("config")
    if value is None:
        return None
    path = Path(value)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    return path


def resolve_workers(settings: Settings, visible_gpus: tuple[int, ...]) -> tuple[WorkerConfig, ...]:
    """The farm to run: configured workers, else one ComfyUI per GPU, else emulated ones.

    `--emulate N` always means N emulated workers; with neither a worker list nor `--comfyui`
    the farm is `--emulate 2`, so the quick start needs no configuration.
    """
    if settings.emulate is not None:
        return _emulated(settings, settings.emulate)
    if settings.workers:
        return tuple(_with_defaults(worker, settings) for worker in settings.workers)
    if settings.comfyui is not None:
        gpus = settings.gpus if settings.gpus is not None else visible_gpus
        return tuple(
            WorkerConfig(
                name=slot_name(gpu),
                gpu=gpu,
                comfyui=settings.comfyui,
                python=settings.comfyui_python,
                preload=settings.preload,
            )
            for gpu in gpus
        )
    return _emulated(settings, DEFAULT_EMULATED)


def _emulated(settings: Settings, count: int) -> tuple[WorkerConfig, ...]:
    return tuple(
        WorkerConfig(
            name=f"sim{index}",
            emulate=settings.emulate_profile,
            checkpoints=settings.emulate_checkpoints,
            models=settings.emulate_models,
            preload=settings.preload,
        )
        for index in range(count)
    )


def _with_defaults(worker: WorkerConfig, settings: Settings) -> WorkerConfig:
    preload = settings.preload if worker.preload is None else worker.preload
    if worker.emulated or worker.url is not None:
        return worker.model_copy(update={"preload": preload})
    return worker.model_copy(
        update={
            "comfyui": worker.comfyui or settings.comfyui,
            "python": worker.python or settings.comfyui_python,
            "preload": preload,
        }
    )


def model_folders(models: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Model lists by folder with legacy names mapped ("unet" is "diffusion_models");
    ValueError for a folder ComfyUI does not have."""
    return {model_folder(folder): names for folder, names in models.items()}


def _slot(value: str) -> int | str:
    """One GPU slot as written ("0", "0+1" or "0,1"): an index, or a CUDA_VISIBLE_DEVICES list."""
    slots = parse_gpu_slots(value.replace(",", "+"))
    return int(slots[0]) if slots[0].isdigit() else slots[0]


def slot_name(gpu: int | str) -> str:
    """A worker name for a slot: gpu0, gpu0_1."""
    return "gpu" + str(gpu).replace(",", "_")

"""The delegate's OpenCL program: source assembled per precision, built once, cached."""

from __future__ import annotations

import functools
import hashlib
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .cache import CacheKey, KernelCache
from .capi import (
    build_from_binary,
    build_from_source,
    opencl_library,
    program_binary,
)
from .codes import opencl_defines
from .records import REGISTRY
from .records.gemm_kernel import GEMM, gemm_instances
from .records.record import Instances, KernelSource, Template, source_file
from .runtime import DeviceInfo, guarded

BUILD_OPTIONS = "-cl-mad-enable -cl-no-signed-zeros"
#: NVIDIA's compiler logs this for every kernel of every program: harmless.
NVIDIA_NOINLINE_NOTE = re.compile(
    r"\(\): Warning: Function \w+ is a kernel, so overriding noinline attribute\. "
    r"The function may be inlined when called\."
)


def only_benign_notes(log: str) -> bool:
    """True when a build log holds NVIDIA's noinline notes and nothing else."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return bool(lines) and all(NVIDIA_NOINLINE_NOTE.fullmatch(line) for line in lines)


def build_quietly(build: Callable[[], Any], device: Any) -> Any:
    """Run a pyopencl build. pyopencl warns whenever the build log is not empty, so every
    build on NVIDIA warned; its compiler warnings are dropped when the log holds only the
    noinline notes, and passed on otherwise."""
    import pyopencl as cl

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = build()
    benign = bool(caught) and only_benign_notes(
        program.get_build_info(device, cl.program_build_info.LOG)
    )
    for w in caught:
        if not (benign and issubclass(w.category, cl.CompilerWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return program


#: Kernels every program holds: storage macros, activations, edge conversions, qdq.
COMMON_SOURCE = "common.cl"


def instantiate(template: str, instances: Instances) -> str:
    """`template`'s text once per instance, its substitutions made."""
    texts = []
    for name, subs in instances.items():
        text = template.replace("@NAME@", name)
        for key, value in subs.items():
            text = text.replace(key, value)
        texts.append(text)
    return "\n".join(texts)


def on_demand_files() -> frozenset[str]:
    """Kernel files compiled only into the programs of models with a delegated op whose
    record lists them, as the records declare them (GpuOp.on_demand): ops vision models
    rarely carry. A CPU device (PoCL) compiles every kernel of a program it saves as a
    binary, so each file here would lengthen every model's cold start (the README's main
    job: 187 s to 334 s with them all in the shared program). ValueError for a record that
    declares a file it does not list, or lists one that another declares on demand."""
    files = {f for record in REGISTRY.values() for f in record.on_demand}
    for record in REGISTRY.values():
        listed = {source_file(k) for k in record.kernels}
        if not set(record.on_demand) <= listed:
            raise ValueError(f"{record.name}: on demand but not listed: {record.on_demand}")
        undeclared = (listed & files) - set(record.on_demand)
        if undeclared:
            raise ValueError(f"{record.name}: lists {sorted(undeclared)}, on demand, as always")
    return frozenset(files)


def kernel_sources(ops: Iterable[str] | None = None) -> list[KernelSource]:
    """The kernel sources of every registered GPU op (records/), once each, in registration
    order; with `ops`, the on_demand_files() only where one of those ops' records lists
    them. A template's file is one Template, whichever records list it."""
    wanted = (
        None
        if ops is None
        else {source_file(k) for op in ops if op in REGISTRY for k in REGISTRY[op].kernels}
    )
    on_demand = on_demand_files()
    sources: dict[str, KernelSource] = {}
    for record in REGISTRY.values():
        for k in record.kernels:
            file = source_file(k)
            if file.endswith(".cl.in") and not isinstance(k, Template):
                raise ValueError(f"{record.name}: template {file} listed without its instances")
            if file in sources:
                if sources[file] != k:  # a Template equals itself only
                    raise ValueError(f"{record.name}: {file} with other instances than before")
                continue
            if wanted is None or file not in on_demand or file in wanted:
                sources[file] = k
    return list(sources.values())


def kernel_files(ops: Iterable[str] | None = None) -> list[str]:
    """The files of kernel_sources(ops)."""
    return [source_file(k) for k in kernel_sources(ops)]


def program_source(
    gemm_variants: dict[str, tuple[int, int, int]] | None = None,
    ops: Iterable[str] | None = None,
) -> str:
    """The whole program: the codes' #defines, the common kernels and every registered
    op's kernel sources (with `ops`, those kernel_sources(ops) names), each template with
    the instances its records declare; `gemm_variants` replaces the GEMM's variants
    (records/gemm_kernel.py: tuning)."""
    pkg = resources.files(__package__)
    parts = [opencl_defines(), (pkg / COMMON_SOURCE).read_text()]
    for k in kernel_sources(ops):
        text = (pkg / source_file(k)).read_text()
        if isinstance(k, Template):
            made = gemm_instances(gemm_variants) if gemm_variants and k is GEMM else k.instances()
            text = instantiate(text, made)
        parts.append(text)
    return "\n".join(parts)


def build_options(storage: str, info: DeviceInfo, half_weights: bool = False) -> str:
    """The build options for `storage`; `half_weights` reads the weights in half with half
    storage (const_types.weights_in_half), else in float32."""
    opts = BUILD_OPTIONS
    if storage == "fp16":
        opts += " -DSTORAGE_HALF"
        if half_weights:
            opts += " -DHALF_WEIGHTS"
        if info.has_fp16:
            opts += " -DHALF_ARITH"
    return opts


def build_source(ctx: Any, device: Any, source: str, options: str) -> Any:
    """Build from source letting other threads run meanwhile (capi.build_from_source);
    through pyopencl where the C library is not at hand. A failed build is built once
    more by pyopencl, whose error carries the build log."""
    import pyopencl as cl

    lib = opencl_library()
    if lib is None:
        return cl.Program(ctx, source).build(options=options, devices=[device])
    program, err = build_from_source(lib, ctx, device, source, options)
    return _checked(program, err, device, options)


def _checked(program: Any, err: int, device: Any, options: str) -> Any:
    """`program` if it built; else pyopencl builds it once more, to raise its error with
    the build log. A non-empty log warns, as pyopencl's own build does."""
    import pyopencl as cl

    if err:
        program.build(options=options, devices=[device])  # raises, with the log
    log = program.get_build_info(device, cl.program_build_info.LOG) or ""
    if log.strip():  # as pyopencl warns for a non-empty log (build_quietly sorts them)
        warnings.warn(f"Built kernels with output: {log.strip()[:2000]}", cl.CompilerWarning, 2)
    return program


#: Platforms whose drivers keep each kernel's machine code in their own cache (pointed
#: inside ours, cache.point_driver_cache). PoCL compiles a kernel when it is first
#: launched, but its program binary holds every kernel compiled: asking for it cost about
#: 140 s cold for the 62 kernels on a 2-core machine, against 3 s for the build and a few
#: seconds for the kernels a model launches. There our entry is empty: a record that this
#: program was built here, the driver holding the rest.
DRIVER_CACHED = ("Portable Computing Language",)


def driver_caches_kernels(info: DeviceInfo) -> bool:
    """Whether `info`'s driver caches the kernels itself (DRIVER_CACHED)."""
    return info.platform in DRIVER_CACHED


@dataclass
class BuiltProgram:
    program: Any
    from_cache: bool
    cache_path: str | None


@dataclass
class RawBuild:
    """A build as the C API left it: `err` is clBuildProgram's status (0: built)."""

    program: Any
    err: int
    from_cache: bool
    cache_path: str | None


#: A session's units: 18-40 on MediaPipe's models, 72-75 on the Keras zoo's largest (at 64
#: NASNetMobile's 72, digested in turn, missed every time).
@functools.lru_cache(maxsize=128)
def source_sha256(source: str) -> str:
    """`source`'s SHA-256, computed once per text: a warm start keys each of a model's
    units three times (whether the cache holds them, which to build, the load itself),
    and a model's units are megabytes."""
    return hashlib.sha256(source.encode()).hexdigest()


def program_key(info: DeviceInfo, token: str, source: str, options: str) -> CacheKey:
    return CacheKey(
        token=token,
        device=info.name,
        driver=info.driver_version,
        options=options,
        source_sha256=source_sha256(source),
    )


def build_raw(
    lib: Any,
    ctx: Any,
    device: Any,
    info: DeviceInfo,
    cache: KernelCache | None,
    key: CacheKey,
    source: str,
    options: str,
) -> RawBuild:
    """Build `source` (from `cache` where it holds it) and store what a later process needs;
    no Python warnings and no pyopencl build here, so that threads can run it at once
    (finish_build, in the caller's thread, checks and reports)."""
    by_driver = driver_caches_kernels(info)
    binary = cache.load(key) if cache is not None else None
    if binary and not by_driver:
        loaded = from_binary(lib, ctx, device, cache, key, binary, options)
        if loaded is not None:
            return loaded  # else the driver refused it: rebuilt from source
    program, err = build_from_source(lib, ctx, device, source, options)
    if err or cache is None:
        return RawBuild(program, err, False, None)
    if by_driver:
        if binary is not None:
            return RawBuild(program, 0, True, str(cache.path(key)))
        return RawBuild(program, 0, False, str(cache.store(key, b"")))
    binary = program_binary(lib, program)
    path = str(cache.store(key, bytes(binary))) if binary else None
    return RawBuild(program, 0, False, path)


def from_binary(
    lib: Any,
    ctx: Any,
    device: Any,
    cache: KernelCache,
    key: CacheKey,
    binary: bytes,
    options: str,
) -> RawBuild | None:
    """`binary`, `cache`'s entry for `key`, built for the device; None where the driver
    refuses it, the entry then removed."""
    program, err = build_from_binary(lib, ctx, device, binary, options)
    if err:
        cache._reject(cache.path(key))
        return None
    return RawBuild(program, 0, True, str(cache.path(key)))


def finish_build(raw: RawBuild, device: Any, options: str) -> BuiltProgram:
    """`raw` checked: a failed build raises with its log, a log's warnings are reported
    (build_quietly sorts them)."""
    program = guarded(
        "building the delegate's kernels",
        lambda: build_quietly(lambda: _checked(raw.program, raw.err, device, options), device),
    )
    return BuiltProgram(program, raw.from_cache, raw.cache_path)


def build_program(
    ctx: Any,
    device: Any,
    info: DeviceInfo,
    storage: str,
    cache: KernelCache | None,
    token: str,
    source: str | None = None,
    half_weights: bool = False,
) -> BuiltProgram:
    """Build the program for `storage` ("fp32"/"fp16"), from the cache when it holds it;
    `source` replaces program_source() (with kernels specialized for a model);
    `half_weights` as build_options'."""
    source = source if source is not None else program_source()
    options = build_options(storage, info, half_weights)
    key = program_key(info, token, source, options)
    lib = opencl_library()
    if lib is not None:
        raw = guarded(
            "building the delegate's kernels",
            lambda: build_raw(lib, ctx, device, info, cache, key, source, options),
        )
        return finish_build(raw, device, options)
    # without the C library: pyopencl alone, and no cache (no binaries to read or store)
    prg = guarded(
        "building the delegate's kernels",
        lambda: build_quietly(lambda: build_source(ctx, device, source, options), device),
    )
    return BuiltProgram(prg, False, None)

#!/usr/bin/env python3
"""Build the endpoint's container image without any registry (Docker or podman).

1. Base image ``localhost/pulsar-txn-proxy-base:bookworm``: a Debian bookworm root file system made with
   ``debootstrap`` from the machine's configured Debian mirror (Python 3.11), imported into the engine.
   ``BASE_IMAGE=python:3.11-slim-bookworm`` skips this where a registry is reachable.
2. Wheels of the project and of its dependencies for the image's Python (CPython 3.11, manylinux) are made on
   the host with pip; the dependency wheels are cached in ``build/wheelhouse`` per dependency set.
3. ``compose/Containerfile`` installs the wheels offline into ``/opt/venv``.

Each image carries a label with the hash of its inputs (sources, pyproject, Containerfile, this script, base);
an image whose label matches is not rebuilt. Standard library only, so any Python 3.11+ runs it.
Usage: ``python3 compose/build_image.py [--spark] [--force] [--engine podman|docker]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "compose"
CONTAINERFILE = COMPOSE / "Containerfile"
BUILD = ROOT / "build"
IMAGE = "localhost/pulsar-txn-proxy"
BASE_REPO = "localhost/pulsar-txn-proxy-base"
LABEL = "dev.pulsar-txn-proxy.inputs"
SUITE = "bookworm"
#: The image's interpreter: Debian bookworm's python3.
PYTHON_VERSION = "3.11"
#: Packages of the base root file system per variant (on top of debootstrap's minbase).
BASE_PACKAGES = {
    "endpoint": ["python3", "python3-venv"],
    # The Spark pipeline runs pyspark, which starts a JVM.
    "spark": ["python3", "python3-venv", "openjdk-17-jre-headless"],
}
#: Image tag and pyproject extras per variant.
VARIANTS = {"endpoint": ("latest", ()), "spark": ("spark", ("spark",))}
#: Bump when the way the base root file system is made changes.
BASE_RECIPE = "1"


class BuildError(RuntimeError):
    """The image could not be built; the message says why."""


def log(message: str) -> None:
    print(f"[build_image] {message}", file=sys.stderr, flush=True)


def run(*command: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command, failing with its output."""
    result = subprocess.run([str(c) for c in command], text=True, capture_output=True, check=False, **kwargs)
    if result.returncode != 0:
        raise BuildError(
            f"`{' '.join(map(str, command))}` failed ({result.returncode}):\n"
            f"{result.stdout[-5000:]}\n{result.stderr[-5000:]}"
        )
    return result


def detect_engine() -> str:
    """``$CONTAINER_ENGINE``, else podman, else docker."""
    engine = os.environ.get("CONTAINER_ENGINE") or ("podman" if shutil.which("podman") else "docker")
    if not shutil.which(engine):
        raise BuildError(f"no container engine CLI: `{engine}` is not on PATH (install podman or Docker)")
    return engine


def image_label(engine: str, ref: str) -> str | None:
    """The inputs label of a local image; None when there is no such image."""
    result = subprocess.run(
        [engine, "image", "inspect", "--format", "{{json .Config.Labels}}", ref],
        text=True,
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        return None
    labels = json.loads(result.stdout.strip() or "null") or {}
    return labels.get(LABEL, "")


def _sha(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()[:32]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def source_files() -> list[Path]:
    """The files the project wheel is built from: pyproject, README and the packages pyproject lists."""
    packages = _pyproject()["tool"]["setuptools"]["packages"]
    roots = ["pyproject.toml", "README.md", *sorted({name.split(".")[0] for name in packages})]
    if (ROOT / ".git").exists() and shutil.which("git"):
        listed = run("git", "ls-files", "-co", "--exclude-standard", "--", *roots, cwd=ROOT).stdout.splitlines()
        files = [ROOT / name for name in listed]
    else:
        files = [ROOT / r for r in roots if (ROOT / r).is_file()]
        files += [p for r in roots if (ROOT / r).is_dir() for p in (ROOT / r).rglob("*") if p.is_file()]
    return sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts)


def debian_mirror() -> str:
    """``$DEBIAN_MIRROR``, else the Debian archive this machine's apt uses, else deb.debian.org."""
    if os.environ.get("DEBIAN_MIRROR"):
        return os.environ["DEBIAN_MIRROR"]
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for match in re.finditer(r"(?:^deb\s+(?:\[[^]]*\]\s+)?|^URIs:\s*)(\S+)", text, re.MULTILINE):
            uri = match.group(1).rstrip("/")
            if uri.endswith("/debian") and f"{SUITE}" in text:
                return uri
    return "http://deb.debian.org/debian"


def base_inputs(variant: str) -> str:
    return _sha(BASE_RECIPE, SUITE, *BASE_PACKAGES[variant])


def ensure_base(engine: str, variant: str) -> str:
    """The base image reference, made with debootstrap when missing or outdated."""
    if os.environ.get("BASE_IMAGE"):
        return os.environ["BASE_IMAGE"]
    ref = f"{BASE_REPO}:{SUITE}" + ("" if variant == "endpoint" else f"-{variant}")
    inputs = base_inputs(variant)
    if image_label(engine, ref) == inputs:
        return ref
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not Path(debootstrap).exists():
        raise BuildError("debootstrap is missing: `apt-get install debootstrap` (or set BASE_IMAGE)")
    if os.geteuid() != 0:
        raise BuildError("debootstrap needs root to make the base image (or set BASE_IMAGE)")
    mirror = debian_mirror()
    began = time.monotonic()
    log(f"making {ref} with debootstrap {SUITE} from {mirror} (packages: {', '.join(BASE_PACKAGES[variant])})")
    cache = BUILD / "debootstrap-cache"
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rootfs-", dir=BUILD) as tmp:
        rootfs = Path(tmp) / "rootfs"
        run(
            debootstrap, "--variant=minbase", f"--include={','.join(BASE_PACKAGES[variant])}",
            f"--cache-dir={cache}", SUITE, rootfs, mirror,
        )
        # Smaller image: no package lists, .deb files, docs or man pages.
        for junk in ("var/lib/apt/lists", "var/cache/apt", "usr/share/doc", "usr/share/man", "usr/share/info"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
        (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        tarball = Path(tmp) / "rootfs.tar"
        run("tar", "-C", rootfs, "--numeric-owner", "-cf", tarball, ".")
        run(engine, "import", "--change", f"LABEL {LABEL}={inputs}", "--change", 'CMD ["/bin/bash"]', tarball, ref)
    log(f"{ref} made in {time.monotonic() - began:.1f} s")
    return ref


def _dependency_wheels(project_wheel: Path, extras: tuple[str, ...]) -> Path:
    """Wheels of the project's dependencies for the image's Python, cached per dependency set."""
    meta = _pyproject()["project"]
    optional = meta.get("optional-dependencies", {})
    missing = [e for e in extras if e not in optional]
    if missing:
        raise BuildError(f"pyproject.toml has no extra {missing}: the Spark image needs it")
    machine = platform.machine()
    key = _sha(json.dumps([meta["dependencies"], [optional[e] for e in extras], PYTHON_VERSION, machine]))
    wheels = BUILD / "wheelhouse" / f"deps-{key}"
    if (wheels / ".complete").exists():
        return wheels
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir(parents=True)
    spec = f"pulsar-txn-proxy[{','.join(extras)}] @ {project_wheel.as_uri()}" if extras else str(project_wheel)
    platforms = [f"manylinux_2_{minor}_{machine}" for minor in range(36, 16, -1)] + [f"manylinux2014_{machine}"]
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheels), "--only-binary=:all:",
        "--python-version", PYTHON_VERSION, "--implementation", "cp",
        "--abi", f"cp{PYTHON_VERSION.replace('.', '')}", "--abi", "abi3", "--abi", "none",
        *(arg for p in platforms for arg in ("--platform", p)), spec,
    ]
    result = subprocess.run(command, text=True, capture_output=True, check=False)
    if result.returncode != 0:
        # Some dependency has no wheel (pyspark is published as an sdist only): build them on the host, which
        # gives the right wheels when the host runs CPython 3.11 as the image does.
        host = f"{sys.version_info.major}.{sys.version_info.minor}"
        if host != PYTHON_VERSION:
            raise BuildError(
                f"`pip download` found no wheel for some dependency and this Python is {host}, not "
                f"{PYTHON_VERSION}: run the script with a Python {PYTHON_VERSION}.\n{result.stderr[-3000:]}"
            )
        log("some dependency has no wheel: building wheels with the host's pip")
        run(sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", wheels, spec)
    for own in wheels.glob("pulsar_txn_proxy-*"):
        own.unlink()
    (wheels / ".complete").touch()
    return wheels


def _project_wheel(files: list[Path], out: Path) -> Path:
    """Build the project's wheel from a clean copy of its sources (no stale build/ leftovers)."""
    with tempfile.TemporaryDirectory(prefix="src-", dir=BUILD) as tmp:
        for path in files:
            target = Path(tmp) / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        # Without build isolation when this Python has a recent setuptools: no download, seconds faster.
        check = "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 70)"
        local = subprocess.run([sys.executable, "-c", check], capture_output=True, check=False).returncode == 0
        isolation = ["--no-build-isolation"] if local else []
        run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "--wheel-dir", out, tmp)
    wheel = next(out.glob("pulsar_txn_proxy-*.whl"))
    # A subpackage missing from pyproject's list works in the editable install and breaks only in the image.
    with zipfile.ZipFile(wheel) as archive:
        packed = set(archive.namelist())
    missing = [str(p.relative_to(ROOT)) for p in files if p.suffix == ".py" and str(p.relative_to(ROOT)) not in packed]
    if missing:
        raise BuildError(
            f"modules missing from the wheel (list their packages in pyproject's [tool.setuptools] packages): {missing}"
        )
    return wheel


def _engine_build(engine: str, args: list[str]) -> None:
    result = subprocess.run([engine, "build", *args], text=True, capture_output=True, check=False)
    if result.returncode != 0:
        raise BuildError(f"`{engine} build` failed:\n{result.stdout[-8000:]}\n{result.stderr[-8000:]}")


def inputs_hash(variant: str = "endpoint") -> str:
    """The hash of everything the image is made from: the label a current image carries."""
    files = source_files()
    parts: list[str | bytes] = [variant, base_inputs(variant), os.environ.get("BASE_IMAGE", "")]
    for path in [*files, CONTAINERFILE, Path(__file__).resolve()]:
        parts += [str(path.relative_to(ROOT)), path.read_bytes()]
    return _sha(*parts)


def ensure_image(variant: str = "endpoint", *, force: bool = False, engine: str | None = None) -> str:
    """Build the image unless one with the same inputs exists; returns its reference."""
    engine = engine or detect_engine()
    tag, extras = VARIANTS[variant]
    ref = f"{IMAGE}:{tag}"
    inputs = inputs_hash(variant)
    if not force and image_label(engine, ref) == inputs:
        log(f"{ref} is up to date ({inputs})")
        return ref
    began = time.monotonic()
    base = ensure_base(engine, variant)
    BUILD.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="image-context-", dir=BUILD) as tmp:
        context = Path(tmp)
        project = _project_wheel(source_files(), context / "wheels" / "app")
        deps = _dependency_wheels(project, extras)
        shutil.copytree(deps, context / "wheels" / "deps", ignore=shutil.ignore_patterns(".complete"))
        options = [
            "--file", str(CONTAINERFILE),
            "--build-arg", f"BASE_IMAGE={base}", "--build-arg", f"EXTRAS={','.join(extras)}",
        ]
        if engine.endswith("podman"):
            # Docker format keeps HEALTHCHECK (OCI image config has no place for it). RUN steps get ulimits within
            # the machine's hard limits: podman's defaults are higher, and raising them needs CAP_SYS_RESOURCE.
            limit = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], resource.getrlimit(resource.RLIMIT_NPROC)[1])
            limit = 1048576 if limit == resource.RLIM_INFINITY else limit
            options += ["--format", "docker", "--layers", f"--ulimit=nofile={limit}:{limit}"]
            options += [f"--ulimit=nproc={limit}:{limit}"]
        log(f"building {ref} with {engine}")
        # The install stage, tagged: it holds the dependency layers the next build reuses, so pruning keeps them.
        _engine_build(engine, [*options, "--target", "install", "--tag", f"{IMAGE}:{tag}-build-cache", str(context)])
        _engine_build(engine, [*options, "--tag", ref, "--label", f"{LABEL}={inputs}", str(context)])
    log(f"{ref} built in {time.monotonic() - began:.1f} s ({inputs})")
    # Untagged images of earlier builds of this project (all carry the label, the base's included); nobody else's.
    prune = [engine, "image", "prune", "--force", "--filter", f"label={LABEL}"]
    subprocess.run(prune, capture_output=True, check=False)
    return ref


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spark", action="store_true", help="the image for the Spark pipeline (JRE + [spark] extra)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the image is up to date")
    parser.add_argument("--engine", help="podman or docker (default: $CONTAINER_ENGINE, else podman, else docker)")
    parser.add_argument("--print-hash", action="store_true", help="print the inputs hash and exit")
    args = parser.parse_args()
    variant = "spark" if args.spark else "endpoint"
    if args.print_hash:
        print(inputs_hash(variant))
        return 0
    try:
        print(ensure_image(variant, force=args.force, engine=args.engine))
    except BuildError as exc:
        print(f"[build_image] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

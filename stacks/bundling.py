"""The one Lambda code asset, with third-party dependencies bundled without Docker.

`cdk synth`/`cdk deploy` (context `longhaul:bundle=true`, set in cdk.json) installs `lambdas/requirements.txt`
with pip for the Lambda platform (manylinux wheels for the target architecture and Python) next to the source.
`python app.py` (tests, the local runtime) skips bundling: the functions run in-process there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

LAMBDAS_DIR = Path(__file__).resolve().parent.parent / "lambdas"
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
# Wheels for the Lambda platform (Amazon Linux 2023, glibc 2.34): any manylinux tag up to that.
_PLATFORMS = {
    arch: [f"--platform=manylinux{tag}_{machine}" for tag in ("2014", "_2_28", "_2_34")]
    for arch, machine in (("arm64", "aarch64"), ("x86_64", "x86_64"))
}
CONSTRAINTS = LAMBDAS_DIR.parent / "constraints.txt"
EXCLUDE = ["**/__pycache__", "**/*.pyc", "tests", ".mypy_cache"]


@jsii.implements(ILocalBundling)
class PipBundling:
    """Bundles source + wheels for the Lambda platform with the local pip (no Docker)."""

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        out = Path(output_dir)
        python_version = RUNTIME.name.removeprefix("python")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                "--only-binary=:all:",
                *_PLATFORMS[ARCHITECTURE.name],
                f"--python-version={python_version}",
                "--implementation=cp",
                "--target",
                str(out),
                "-r",
                str(LAMBDAS_DIR / "requirements.txt"),
                "-c",
                str(CONSTRAINTS),
            ],
            check=True,
        )
        shutil.copytree(LAMBDAS_DIR, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return True


def code_asset(*, bundle: bool) -> lambda_.Code:
    if not bundle:
        return lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=EXCLUDE)
    return lambda_.Code.from_asset(
        str(LAMBDAS_DIR),
        exclude=EXCLUDE,
        asset_hash_type=AssetHashType.SOURCE,
        bundling=BundlingOptions(
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.14"),
            local=PipBundling(),
            command=["echo", "local bundling only"],
        ),
    )

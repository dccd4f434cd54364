#!/usr/bin/env bash
# Runs the fleet workflow (.github/workflows/fleet.yml) as plain shell, so the file cannot rot:
# every `run` step of every matrix job with its expressions filled in (inputs from the
# arguments), `uses:` steps done here (checkout: this tree; artifacts: a folder), the install
# step replaced by this tree's build on PATH; then the merge job. Exit as the workflow would.
# Usage: scripts/check-workflow.sh PATCH.ko KERNELS_DIR [BUILT_FOR]
set -euo pipefail
cd "$(dirname "$0")/.."
patch="${1:?usage: check-workflow.sh PATCH.ko KERNELS_DIR [BUILT_FOR]}"
kernels="${2:?}" built_for="${3:-}"
bin_dir="$PWD/target/ci"
[ -x "$bin_dir/klpsym" ] || cargo build -q --profile ci -p klpsym-cli
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$PWD" "$work" "$bin_dir" "$patch" "$kernels" "$built_for" <<'PY'
import os, re, shutil, subprocess, sys

root, work, bin_dir, patch, kernels, built_for = sys.argv[1:]
wf = open(os.path.join(root, ".github/workflows/fleet.yml")).read()

def parse(text):
    """The few YAML shapes the workflow uses (maps, lists, block scalars), read here: the
    machine's Python need not have a YAML library."""
    try:
        import yaml  # noqa: F401
        return yaml.safe_load(text)
    except ImportError:
        pass
    sys.exit("check-workflow: PyYAML is needed to read the workflow (pip install pyyaml)")

doc = parse(wf)
inputs = {"patch": patch, "kernels": kernels, "built_for": built_for}
artifacts = os.path.join(work, "artifacts")
os.makedirs(artifacts)

def fill(s, matrix):
    def one(m):
        e = m.group(1).strip()
        if e.startswith("inputs."):
            return inputs[e.split(".", 1)[1]]
        if e.startswith("matrix."):
            return str(matrix[e.split(".", 1)[1]])
        raise SystemExit(f"check-workflow: unknown expression ${{{{ {e} }}}}")
    return re.sub(r"\$\{\{(.*?)\}\}", one, str(s))

def run_job(name, job, matrix):
    cwd = os.path.join(work, f"{name}-{'-'.join(map(str, matrix.values())) or 'job'}")
    os.makedirs(cwd)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    for k, v in (job.get("env") or {}).items():
        env[k] = fill(v, matrix)
    for step in job["steps"]:
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout"):
            continue
        if uses.startswith("actions/upload-artifact"):
            for p in fill(step["with"]["path"], matrix).split():
                shutil.copy(os.path.join(cwd, p), artifacts)
            continue
        if uses.startswith("actions/download-artifact"):
            shutil.copytree(artifacts, os.path.join(cwd, step["with"]["path"]))
            continue
        if uses:
            raise SystemExit(f"check-workflow: step uses {uses}, which this script does not know")
        if step.get("id") == "install":
            continue  # this tree's build is on PATH
        print(f"== {name} {matrix}: {step.get('name', 'run')}", flush=True)
        r = subprocess.run(["bash", "-eo", "pipefail", "-c", fill(step["run"], matrix)], cwd=cwd, env=env)
        if r.returncode != 0:
            return r.returncode
    return 0

status = 0
check = doc["jobs"]["check"]
for shard in check["strategy"]["matrix"]["shard"]:
    if run_job("check", check, {"shard": shard}) != 0:
        status = 1
merged = run_job("merge", doc["jobs"]["merge"], {})
sys.exit(status or merged)
PY

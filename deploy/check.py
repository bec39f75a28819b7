#!/usr/bin/env python3
"""Checks deploy/ and dashboards/ with what this machine has: `.ci/run` runs it.

- the Helm chart: Chart.yaml and values.yaml parse, and every `.Values.…` a
  template names exists in values.yaml; with `helm` on PATH also `helm lint` and
  `helm template` (piped into `kubeconform` when that is installed too);
- docker-compose.yml: `docker compose config` (v2) or `docker-compose config` (v1);
- the Grafana dashboard parses and every panel has a query.

`promtool check rules` / `promtool test rules` run from `.ci/run` itself, and the
metric names are checked by `cargo test -p hookline`.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHART = os.path.join(ROOT, "deploy", "helm", "hookline")
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def lookup(values, path):
    node = values
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


with open(os.path.join(CHART, "Chart.yaml")) as f:
    chart = yaml.safe_load(f)
check(chart.get("apiVersion") == "v2" and chart.get("name") == "hookline", "Chart.yaml: apiVersion v2, name hookline")
with open(os.path.join(CHART, "values.yaml")) as f:
    values = yaml.safe_load(f)
templates = os.path.join(CHART, "templates")
for name in sorted(os.listdir(templates)):
    with open(os.path.join(templates, name)) as f:
        text = f.read()
    for match in re.finditer(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text):
        path = match.group(1).lstrip(".").split(".")
        check(lookup(values, path), f"{name}: .Values.{'.'.join(path)} is not in values.yaml")
    check(text.count("{{") == text.count("}}"), f"{name}: unbalanced template braces")

if shutil.which("helm"):
    subprocess.run(["helm", "lint", CHART, "--set", "adminToken=x,masterKey=y"], check=True)
    rendered = subprocess.run(
        ["helm", "template", "hookline", CHART, "--set", "adminToken=x,masterKey=y"],
        check=True, capture_output=True, text=True,
    ).stdout
    if shutil.which("kubeconform"):
        subprocess.run(["kubeconform", "-strict", "-summary", "-"], input=rendered, check=True, text=True)
    else:
        print("check.py: kubeconform not installed: the rendered chart was not schema-checked")
else:
    print("check.py: helm not installed: `helm lint` and `helm template | kubeconform` skipped")

compose = os.path.join(ROOT, "deploy", "docker-compose.yml")
env = dict(os.environ, HOOKLINE_ADMIN_TOKEN="check", HOOKLINE_MASTER_KEY="check")
if shutil.which("docker-compose"):
    subprocess.run(["docker-compose", "-f", compose, "config", "-q"], check=True, env=env)
elif shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
    subprocess.run(["docker", "compose", "-f", compose, "config", "-q"], check=True, env=env)
else:
    print("check.py: neither docker compose nor docker-compose: docker-compose.yml not validated")

with open(os.path.join(ROOT, "dashboards", "hookline.json")) as f:
    dashboard = json.load(f)
for panel in dashboard["panels"]:
    check(panel.get("targets") and all(t.get("expr") for t in panel["targets"]), f"dashboard panel {panel.get('title')!r} has no query")

if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
print("check.py: deploy/ and dashboards/ ok")

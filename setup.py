"""Packages of driftgate: one import namespace, ``driftgate.*``.

The project's required top-level folders (``flows/ monitors/ gates/ data_contracts/``,
and ``training/ serving/``) are installed as subpackages of ``driftgate``, so that a
user's own ``training`` or ``serving`` package never shadows ours (nor ours theirs).
Everything else (metadata, dependencies) is in pyproject.toml.
"""

from setuptools import find_packages, setup

MAPPED_FOLDERS = ("flows", "monitors", "gates", "data_contracts", "training", "serving")

packages = find_packages(include=["driftgate", "driftgate.*"])
package_dir = {"driftgate": "driftgate"}
for folder in MAPPED_FOLDERS:
    package_dir[f"driftgate.{folder}"] = folder
    packages += [f"driftgate.{name}" for name in find_packages(include=[folder, f"{folder}.*"])]

setup(packages=packages, package_dir=package_dir)

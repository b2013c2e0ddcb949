"""The shipped suites (YAML), a package so that they install with tokbench and resolve by name
(``tokbench run smoke``) after a plain ``pip install .``; see harness.cli.find_suite."""

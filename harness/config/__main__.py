"""``python -m harness.config > docs/suite_reference.md``: print the suite reference."""

from harness.config.refdoc import suite_reference

print(suite_reference(), end="")

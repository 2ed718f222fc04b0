"""pi: a host-only agent Orbit installs skills for (in ~/.agents/skills, which Codex and dsh
read too). Orbit runs no pi inside a container and reads no pi transcript."""

from __future__ import annotations

from orbit.harnesses.base import Harness, shared_skills

HARNESS = Harness(id="pi", display="pi", plugin="pi", skills=shared_skills)

"""Agents: installing their CLIs, checking them offline, and driving them through an attempt.

Agent CLIs pinned in their specs and installed into tmlbench's prefix (``installs``), the
offline pre-flight ``tmlbench agents check`` (``check``), what each agent kind adds around its
sandboxed process (``drivers``, filling spec templates: ``templates``), and what stands between
an agent and a model: the built-in agent (``llm``), the provider gateway (``gateway``), the
egress proxy (``egress``) on their common unix-socket server (``socket_server``), the
provider-fault rule (``provider_faults``), the key's redaction (``redaction``) and the scripted
provider on loopback that stands in for a model (``scripted_provider``).

Nothing outside ``runner/`` imports this room today, so it has no surface yet; an outsider that
needs one of its names adds it here as the other rooms do (see ``runner.rooms``).
"""

"""Approval at the dispatch point: the policy gate, out-of-band approvals, the audit log.

- `gate.PolicyGate` implements `dispatch.Gate`: it asks `judge.Judge` (the one pure decision,
  `policy.decide`, in the context only the gate knows, gathered there: roots, protected files,
  symlinks via `links.py`, git config, live approval ids), then denies, lets through, or asks a human (MCP elicitation when the client supports it, else an
  approval id the user approves with `generalagent-mcp approve <id>` or the local HTTP page).
- `store.ApprovalStore` keeps pending/granted approvals (SQLite) and session grants.
- `audit.AuditLog` writes one JSON line per decision with secrets masked.
"""

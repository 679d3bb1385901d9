"""Ingress: CTI generation, CTI import, the DROP/ADJUST policies and event ordering (SPEC 3-7).

``state`` (a stream's typed state), ``group`` (a group of streams linked by CTI imports, at run
time), ``rules`` (the rules a bad row breaks, worded once), ``paths`` (the array paths under one
contract, and the dispatcher), ``vectorized`` / ``ordered`` / ``importing`` (the paths' array
code), ``columns`` (their shared array steps: generation, the policies, edges), ``ordering``
(the event-ordering policy), ``layout`` (the row layouts). Below the engine, above the
operators' data form (``cti.forms.frame``); see ``docs/architecture.md``.
"""

"""Which waiting documents enter the broker next: the admission plan, free of the database.

Batch documents (and backlog submits over a tenant's share) wait in Postgres, not in Redis, so
a 100,000-document batch is accepted at once and the broker holds only what workers can start
soon. Each round the feeder asks this plan which waiting jobs to release:

- never more in flight (admitted, not finished) than the ``window``, all tenants together;
- never more than ``tenant_cap`` in flight for one tenant, so one backlog cannot take every slot;
- interactive work before backlog work, then tenants in turn (the tenant with the least in flight
  next: max-min fair), each tenant's own jobs oldest first.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class WaitingJob:
    job_id: str
    tenant_id: str
    interactive: bool
    created_at: datetime


@dataclass(frozen=True)
class AdmissionPlan:
    job_ids: list[str]  # to release, in order
    room_left: int  # free slots in the window after them


def plan_admission(
    waiting: list[WaitingJob],
    in_flight_by_tenant: dict[str, int],
    *,
    window: int,
    tenant_cap: int,
) -> AdmissionPlan:
    in_flight = dict(in_flight_by_tenant)
    room = window - sum(in_flight.values())
    admitted: list[str] = []
    for interactive in (True, False):
        queues = _queues_by_tenant([w for w in waiting if w.interactive == interactive])
        while room > 0 and (tenant := _next_tenant(queues, in_flight, tenant_cap)):
            admitted.append(queues[tenant].pop(0).job_id)
            in_flight[tenant] = in_flight.get(tenant, 0) + 1
            room -= 1
    return AdmissionPlan(admitted, max(room, 0))


def _queues_by_tenant(waiting: list[WaitingJob]) -> dict[str, list[WaitingJob]]:
    queues: dict[str, list[WaitingJob]] = defaultdict(list)
    for job in sorted(waiting, key=lambda w: (w.created_at, w.job_id)):
        queues[job.tenant_id].append(job)
    return queues


def _next_tenant(
    queues: dict[str, list[WaitingJob]], in_flight: dict[str, int], tenant_cap: int
) -> str | None:
    """The tenant with the least in flight (max-min fair), under its cap, with work waiting;
    on a tie, the one whose next job waited longest."""
    candidates = [
        tenant for tenant, jobs in queues.items() if jobs and in_flight.get(tenant, 0) < tenant_cap
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda t: (in_flight.get(t, 0), queues[t][0].created_at))

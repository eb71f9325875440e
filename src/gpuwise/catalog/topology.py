"""How GPUs are linked: inside one machine (NVSwitch, NVLink mesh or bridge, PCIe with or without
peer-to-peer) and between machines (the provider's network, or none where it rents no clusters).

The data lives in ``data/topology.toml``; :func:`topology_for` picks the machine a GPU comes in
(from the provider where it says, else from the GPU) and :meth:`Topology.ring_link` gives the link a
ring of ``count`` GPUs inside one node really runs at: the slowest hop decides.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from gpuwise.catalog.model import GPU, INTRA_KINDS, NVLINK_KINDS, CatalogError
from gpuwise.catalog.resolve import provider_key

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# x16, one direction, GB/s (PCI-SIG: 8/16/32/64 GT/s per lane with 128b/130b encoding; Gen6 FLIT).
PCIE_X16_GBS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
DEFAULT_GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Link:
    """One link a collective runs over: achievable ring bus bandwidth (nccl-tests busbw) and latency."""

    kind: str
    bus_gbs: float
    latency_s: float
    description: str = ""


@dataclass(frozen=True)
class Topology:
    """The machines ``count`` GPUs of one kind are rented in, as the comm model needs them."""

    gpu_id: str
    intra: str                        # one of INTRA_KINDS
    gpus_per_node: int
    intra_link: Link                  # the link between all GPUs of a node (a ring of > 2 for bridges)
    pair_link: Link                   # the link between two GPUs (NVLink for a bridged pair)
    multi_node: bool                  # does the provider rent several nodes as one cluster?
    network: Link                     # per node, between nodes (the fallback where multi_node is false)
    provider: str | None = None
    note: str = ""
    # Once per collective, whatever its hops: NCCL's kernel launch and the ranks meeting ([nccl] in the data).
    collective_latency_s: float = 0.0

    def nodes(self, count: int) -> int:
        return -(-count // self.gpus_per_node)

    def ring_link(self, count: int) -> Link:
        """The intra-node link a ring over ``min(count, gpus_per_node)`` GPUs runs at."""
        return self.pair_link if min(count, self.gpus_per_node) <= 2 else self.intra_link

    def describe(self, count: int) -> str:
        inside = self.ring_link(count).description or self.intra
        if self.nodes(count) <= 1:
            return inside
        net = self.network.description
        return f"{self.nodes(count)} nodes of {self.gpus_per_node}: {inside} inside, {net} between"


@lru_cache(maxsize=1)
def topology_data() -> dict[str, Any]:
    """The parsed ``topology.toml`` (read once per process)."""
    text = (resources.files("gpuwise.catalog") / "data" / "topology.toml").read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - the shipped file is tested
        raise CatalogError(f"<built-in topology.toml>: not valid TOML: {exc}") from None
    for kind in INTRA_KINDS:
        if kind not in data.get("link", {}):
            raise CatalogError(f"<built-in topology.toml>: link kind {kind!r} is missing")
    return data


def collective_latency_s(data: dict[str, Any] | None = None) -> float:
    """The fixed latency of one NCCL collective, beside its per-hop latencies (``[nccl]``; 0 where absent)."""
    data = data or topology_data()
    return float(data.get("nccl", {}).get("collective_latency_s", 0.0))


def link_efficiencies(data: dict[str, Any] | None = None) -> dict[str, float]:
    """Bus efficiency per intra-node link kind (what the benchmark fits)."""
    data = data or topology_data()
    return {k: float(v["bus_efficiency"]) for k, v in data["link"].items()}


def default_intra(gpu: GPU) -> str:
    """The intra-node link of the machine this GPU usually comes in, when the data names none: NVSwitch for an
    SXM board with NVLink (HGX/DGX); otherwise a card in PCIe slots, as the shipped PCIe cards with NVLink
    bridges are (a bridge is not assumed): without peer-to-peer on a GeForce card (``GPU.geforce``), with it
    on the others. A GPU whose form factor is not given is such a card, whatever its ``nvlink_gbs``."""
    if gpu.nvlink_gbs and (gpu.form_factor or "").lower().startswith("sxm"):
        return "nvswitch"
    if gpu.geforce:   # the driver disables PCIe peer-to-peer on GeForce cards
        return "pcie-host"
    return "pcie-p2p"


def _intra_link(kind: str, gpu: GPU, data: dict[str, Any], efficiency: dict[str, float]) -> Link:
    spec = data["link"][kind]
    if kind in NVLINK_KINDS:
        if not gpu.nvlink_gbs:
            raise CatalogError(f"topology: {gpu.id} has no NVLink, so it cannot be linked by {kind}")
        nominal = gpu.nvlink_gbs / 2
    else:
        nominal = PCIE_X16_GBS.get(int(gpu.pcie_gen or 4), PCIE_X16_GBS[4])
    return Link(kind, nominal * efficiency[kind], float(spec["latency_s"]), spec.get("description", kind))


def _network_link(kind: str, gbps_per_node: float, data: dict[str, Any], note: str) -> Link:
    spec = data["network"].get(kind)
    if spec is None:
        raise CatalogError(f"topology: unknown network kind {kind!r} (known: {', '.join(data['network'])})")
    desc = f"{gbps_per_node:g} Gb/s {kind} per node" + (f" ({note})" if note else "")
    return Link(kind, gbps_per_node / 8 * float(spec["bus_efficiency"]), float(spec["latency_s"]), desc)


def provider_entry(provider: str | None, data: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The topology data's ``[[provider]]`` called ``provider`` by its name or one of its ``aliases`` (as
    ``provider_key`` compares them: gpuhunt's "lambdalabs" is "lambda"); None where the data names none."""
    if provider is None:
        return None
    data = data or topology_data()
    wanted = provider_key(provider)
    return next((p for p in data.get("provider", [])
                 if wanted in {provider_key(n) for n in (p["name"], *p.get("aliases", ()))}), None)


def provider_name(provider: str) -> str:
    """The one spelling of ``provider`` its offers are listed under: the topology data's name for it ("vastai" ->
    "vast"), else ``provider`` as given (a provider of the user's own)."""
    entry = provider_entry(provider)
    return entry["name"] if entry is not None else provider


def rents_per_gpu(provider: str | None) -> bool:
    """Does ``provider`` rent any number of GPUs on one host at one GPU's price × the number (its
    ``rents_per_gpu`` in the topology data: a marketplace such as AutoDL or RunPod), rather than fixed instance
    shapes (a cloud: only the counts its offers list)?"""
    return bool((provider_entry(provider) or {}).get("rents_per_gpu", False))


def topology_for(
    gpu: GPU, provider: str | None = None, *, intra: str | None = None,
    efficiency: dict[str, float] | None = None,
) -> Topology:
    """The topology of ``gpu``'s machines at ``provider`` (None: the GPU's usual machine, no cluster).

    ``intra`` overrides the intra-node link kind (an offer or a benchmark system that says which);
    ``efficiency`` overrides the bus efficiencies per link kind (the benchmark's fit). Which machine, first
    that says: ``intra``, the GPU's own ``intra_link`` / ``gpus_per_node`` (the user's file: they know their
    machine), the provider's machine for the GPU, the GPU's usual machine in the data, ``default_intra``.
    """
    data = topology_data()
    eff = {**link_efficiencies(data), **(efficiency or {})}
    system = next((s for s in data.get("system", []) if s["gpu"] == gpu.id), {})
    prov = provider_entry(provider, data) or {}
    prov_system = next((s for s in prov.get("system", []) if s["gpu"] == gpu.id), {})
    kind = intra or gpu.intra_link or prov_system.get("intra") or system.get("intra") or default_intra(gpu)
    if kind not in INTRA_KINDS:
        raise CatalogError(f"topology: unknown link kind {kind!r} (known: {', '.join(INTRA_KINDS)})")
    per_node = int(gpu.gpus_per_node or prov_system.get("gpus_per_node") or system.get("gpus_per_node")
                   or DEFAULT_GPUS_PER_NODE)
    intra_link = _intra_link(kind, gpu, data, eff)
    pair_link = intra_link
    if kind == "nvlink-bridge":   # a ring beyond the pair crosses PCIe between the bridged pairs
        intra_link = _intra_link("pcie-p2p", gpu, data, eff)
    multi = bool(prov.get("multi_node", False))
    net_kind = prov_system.get("network") or prov.get("network")
    if multi and net_kind:
        gbps = float(prov_system.get("network_gbps_per_node") or prov["network_gbps_per_node"])
        network = _network_link(net_kind, gbps, data, prov_system.get("note", ""))
        note = ""
    else:
        fb = data["fallback_network"]
        network = _network_link(fb["network"], float(fb["network_gbps_per_node"]), data, "assumed")
        why = prov.get("note") or (f"provider {provider!r} lists no cluster network" if provider
                                   else "no provider named")
        note = f"{why}: machines assumed linked by {fb['network_gbps_per_node']:g} Gb/s {fb['network']}"
    return Topology(gpu.id, kind, per_node, intra_link, pair_link, multi, network,
                    provider=prov.get("name", provider), note=note,
                    collective_latency_s=collective_latency_s(data))

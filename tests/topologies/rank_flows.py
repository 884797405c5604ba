"""Flows of ranked collective groups, for the enumeration tests of the dragonfly and fat-tree placements."""


def rings(devices, stride, n, inner=1):
    """Ring collectives over groups of ``n`` ranks ``stride`` apart (blocks of ``stride n``), each rank
    sending to the next member and the last to the first. ``inner`` ranks of a group per scale-up domain:
    the outer phase's rings join the ranks with the same index in their domain (every ``inner``-th)."""
    flows = []
    for b in range(0, devices, stride * n):
        for o in range(stride):
            members = [b + o + j * stride for j in range(n)]
            for l in range(inner):
                ring = members[l::inner]
                if len(ring) > 1:
                    flows += [(ring[j], ring[(j + 1) % len(ring)]) for j in range(len(ring))]
    return flows

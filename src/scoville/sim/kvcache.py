"""KV cache of one simulated instance: blocks, a prefix cache with LRU eviction, and a host tier.

Modelled on vLLM v1's block manager, at the granularity that decides latency:

* HBM holds ``num_blocks`` blocks of ``block_size`` tokens. A request holds the
  blocks of the tokens it has computed; it cannot be scheduled for more tokens
  than free blocks allow, and the scheduler preempts when they run out.
* With prefix caching, every *full* prompt block whose content is known (a block
  key derived from the request's ``block_hashes``) is registered when computed.
  When its last user finishes, the block stays resident but evictable, in LRU
  order; a later request whose prompt starts with the same keys reuses it.
  Evicting a cached block is how a new allocation is satisfied once free blocks
  run out — the LRU policy of vLLM.
* An optional host tier (``HostTier``) keeps what HBM evicts: cached prefix
  blocks, and the whole KV of a preempted request (so it is reloaded, not
  recomputed). It has its own capacity (LRU) and its own bandwidth; the engine
  charges the copy time to the step that needs the data.

Blocks are counted, not named: only hashed (shareable) blocks carry identity,
because private blocks are interchangeable for every decision the scheduler
makes. That keeps allocation O(1) per request per step.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable


class HostTier:
    """Host-memory KV store: LRU over entries of one or more blocks, bounded in blocks."""

    def __init__(self, capacity_blocks: int, bytes_per_block: float, bandwidth_bytes_s: float) -> None:
        self.capacity_blocks = capacity_blocks
        self.bytes_per_block = bytes_per_block
        self.bandwidth_bytes_s = bandwidth_bytes_s
        self._entries: OrderedDict[Hashable, int] = OrderedDict()
        self.used_blocks = 0
        self.stored_blocks_total = 0
        self.loaded_blocks_total = 0

    def transfer_time(self, blocks: int) -> float:
        """Seconds to copy ``blocks`` blocks between host and HBM."""
        return blocks * self.bytes_per_block / self.bandwidth_bytes_s

    def put(self, key: Hashable, blocks: int) -> bool:
        """Store an entry, evicting the least recently used ones; False if it can never fit."""
        if blocks > self.capacity_blocks:
            return False
        if key in self._entries:
            self._entries.move_to_end(key)
            return True
        while self.used_blocks + blocks > self.capacity_blocks:
            _, old = self._entries.popitem(last=False)
            self.used_blocks -= old
        self._entries[key] = blocks
        self.used_blocks += blocks
        self.stored_blocks_total += blocks
        return True

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def pop(self, key: Hashable) -> int:
        blocks = self._entries.pop(key)
        self.used_blocks -= blocks
        self.loaded_blocks_total += blocks
        return blocks


class KVCache:
    """HBM block pool with reference-counted prefix blocks and LRU eviction."""

    def __init__(self, num_blocks: int, block_size: int, *, prefix_caching: bool,
                 host: HostTier | None = None) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.host = host
        self.free = num_blocks
        self._refs: dict[Hashable, int] = {}
        self._lru: OrderedDict[Hashable, None] = OrderedDict()  # resident, unreferenced, oldest first
        self.evictions_total = 0

    @property
    def available(self) -> int:
        """Blocks an allocation can get: free ones plus evictable cached ones."""
        return self.free + len(self._lru)

    @property
    def used(self) -> int:
        """Blocks held by running requests (cached-but-idle blocks count as reclaimable, not used)."""
        return self.num_blocks - self.available

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def allocate(self, blocks: int) -> bool:
        """Take ``blocks`` private blocks, evicting LRU cached blocks (to the host tier) if needed."""
        if blocks > self.available:
            return False
        take = min(blocks, self.free)
        self.free -= take
        for _ in range(blocks - take):
            key, _ = self._lru.popitem(last=False)
            del self._refs[key]
            self.evictions_total += 1
            if self.host is not None:
                self.host.put(key, 1)  # asynchronous write-back; its time overlaps compute
        return True

    def match(self, keys: list[Hashable], limit: int) -> tuple[int, int]:
        """Longest cached prefix of ``keys`` (at most ``limit`` blocks): (blocks in HBM, further blocks on host)."""
        if not self.prefix_caching:
            return 0, 0
        hbm = 0
        while hbm < limit and keys[hbm] in self._refs:
            hbm += 1
        host = 0
        if self.host is not None:
            while hbm + host < limit and keys[hbm + host] in self.host:
                host += 1
        return hbm, host

    def evictable_among(self, keys: list[Hashable]) -> int:
        """How many of these resident keys are currently evictable (acquiring them shrinks ``available``)."""
        return sum(1 for k in keys if k in self._lru)

    def acquire(self, keys: list[Hashable]) -> None:
        """Reference resident cached blocks (a prefix hit)."""
        for k in keys:
            self._refs[k] += 1
            self._lru.pop(k, None)

    def register(self, key: Hashable) -> bool:
        """Turn one of the caller's freshly computed private blocks into a shared cached block.

        False when an identical block is already resident (computed concurrently):
        the caller keeps its copy private, as vLLM does.
        """
        if not self.prefix_caching or key in self._refs:
            return False
        self._refs[key] = 1
        return True

    def release(self, keys: list[Hashable], private_blocks: int) -> None:
        """A request gives back its blocks: shared ones become evictable when unreferenced."""
        self.free += private_blocks
        for k in keys:
            n = self._refs[k] - 1
            self._refs[k] = n
            if n == 0:
                self._lru[k] = None

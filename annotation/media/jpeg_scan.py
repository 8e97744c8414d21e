"""Where a JPEG scan's entropy-coded data really ends.

A decoder reads a scan's Huffman codes until it has every block of the scan (or of the
restart interval) and then skips whatever bytes stand before the next marker; a generator's
name put there is never shown but would reach a browser. ``jpeg_scan_data`` walks the codes
(without computing a single coefficient) to find the last byte a decoder reads in each
interval, for Huffman-coded sequential and progressive JPEGs (SOF0, SOF1, SOF2), and returns
the scan's data without the bytes that follow it. Other codings (arithmetic, lossless,
hierarchical) are not walked: their data is kept as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WALKED_FRAMES = {0xC0, 0xC1, 0xC2}
_PROGRESSIVE = 0xC2
_PEEK_BITS = 16
_WALKING = 2  # table class offset of the walking tables kept beside the peek tables


class ScanError(ValueError):
    """The scan cannot be walked: its codes do not fit its tables or its data ends early."""


@dataclass
class Component:
    ident: int
    h: int
    v: int
    # For progressive AC refinement: one byte per coefficient of every block, 1 when the
    # coefficient is known to be nonzero (blocks in row order, 64 a block, zigzag order).
    nonzero: bytearray | None = None
    blocks_wide: int = 0
    blocks_high: int = 0


@dataclass
class Frame:
    kind: int
    width: int
    height: int
    components: list[Component]
    h_max: int = field(init=False)
    v_max: int = field(init=False)

    def __post_init__(self) -> None:
        self.h_max = max(c.h for c in self.components)
        self.v_max = max(c.v for c in self.components)
        for c in self.components:  # with the blocks that pad the last MCUs
            c.blocks_wide = -(-self.width // (8 * self.h_max)) * c.h
            c.blocks_high = -(-self.height // (8 * self.v_max)) * c.v


def frame_parse(marker: int, payload: bytes) -> Frame:
    if len(payload) < 6:
        raise ScanError("frame header too short")
    height = int.from_bytes(payload[1:3], "big")
    width = int.from_bytes(payload[3:5], "big")
    count = payload[5]
    if len(payload) < 6 + 3 * count or not count or not width or not height:
        raise ScanError("frame header of a wrong size")
    components = []
    for n in range(count):
        ident, sampling = payload[6 + 3 * n], payload[7 + 3 * n]
        h, v = sampling >> 4, sampling & 15
        if not 1 <= h <= 4 or not 1 <= v <= 4:
            raise ScanError("wrong sampling factors")
        components.append(Component(ident, h, v))
    return Frame(marker, width, height, components)


def huffman_tables_parse(payload: bytes, tables: dict[tuple[int, int], list]) -> None:
    """Adds the DHT segment's tables to ``tables`` as peek tables: for every 16-bit window,
    (code length, symbol), length 0 for a window that starts with no code."""
    pos = 0
    while pos < len(payload):
        if pos + 17 > len(payload):
            raise ScanError("truncated Huffman table")
        kind = payload[pos]
        counts = payload[pos + 1 : pos + 17]
        total = sum(counts)
        symbols = payload[pos + 17 : pos + 17 + total]
        if len(symbols) != total:
            raise ScanError("truncated Huffman table")
        lut: list[tuple[int, int]] = [(0, 0)] * (1 << _PEEK_BITS)
        walking: list[tuple[int, int]] = [(0, 0)] * (1 << _PEEK_BITS)
        code, n = 0, 0
        for length in range(1, 17):
            for _ in range(counts[length - 1]):
                shift = _PEEK_BITS - length
                if code >= 1 << length:
                    raise ScanError("Huffman table with too many codes")
                window = slice(code << shift, (code + 1) << shift)
                lut[window] = [(length, symbols[n])] * (1 << shift)
                walking[window] = [_walking_entry(kind >> 4, length, symbols[n])] * (1 << shift)
                code += 1
                n += 1
            code <<= 1
        tables[(kind >> 4, kind & 15)] = lut
        tables[(_WALKING + (kind >> 4), kind & 15)] = walking
        pos += 17 + total


def _walking_entry(table_class: int, length: int, symbol: int) -> tuple[int, int]:
    """For a sequential scan: the bits a code and its magnitude take, and the coefficients
    it advances (0 for the end of a block)."""
    if table_class == 0:
        return length + symbol, 1
    size = symbol & 15
    if size:
        return length + size, (symbol >> 4) + 1
    return length, 16 if symbol == 0xF0 else 0


class _Bits:
    """Reads the bits of one entropy-coded segment (stuffed bytes FF00 read as FF)."""

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self.start = start
        self.unstuffed = data[start:end].replace(b"\xff\x00", b"\xff")
        # Padding, so that a peek at the last code may look past the data.
        self.buf = self.unstuffed + b"\xff" * 8
        self.acc = 0
        self.bits = 0
        self.pos = 0

    def _fill(self) -> None:
        self.acc = ((self.acc & ((1 << self.bits) - 1)) << 64) | int.from_bytes(
            self.buf[self.pos : self.pos + 8], "big"
        )
        self.pos += 8
        self.bits += 64

    def symbol(self, lut: list[tuple[int, int]]) -> int:
        if self.bits < _PEEK_BITS:
            self._fill()
        length, value = lut[(self.acc >> (self.bits - _PEEK_BITS)) & 0xFFFF]
        if not length:
            raise ScanError("a code that is not in the Huffman table")
        self.bits -= length
        return value

    def skip(self, count: int) -> None:
        while self.bits < count:
            self._fill()
        self.bits -= count

    def take(self, count: int) -> int:
        while self.bits < count:
            self._fill()
        self.bits -= count
        return (self.acc >> self.bits) & ((1 << count) - 1)

    def end(self) -> int:
        """The position in the original bytes just after the last byte a decoder read."""
        used_bytes = -(-(self.pos * 8 - self.bits) // 8)
        if used_bytes > len(self.unstuffed):
            raise ScanError("the scan's data ends before its last block")
        # Map the unstuffed length back: every FF read was followed by a stuffed 00.
        return self.start + used_bytes + self.unstuffed[:used_bytes].count(b"\xff")


@dataclass
class Scan:
    components: list[tuple[Component, int, int]]  # component, DC table id, AC table id
    ss: int
    se: int
    ah: int
    al: int


def scan_parse(payload: bytes, frame: Frame) -> Scan:
    count = payload[0] if payload else 0
    if not count or len(payload) != 1 + 2 * count + 3:
        raise ScanError("scan header of a wrong size")
    by_id = {c.ident: c for c in frame.components}
    components = []
    for n in range(count):
        ident, tables = payload[1 + 2 * n], payload[2 + 2 * n]
        if ident not in by_id:
            raise ScanError("scan of an unknown component")
        components.append((by_id[ident], tables >> 4, tables & 15))
    ss, se, approx = payload[1 + 2 * count], payload[2 + 2 * count], payload[3 + 2 * count]
    return Scan(components, ss, se, approx >> 4, approx & 15)


def jpeg_scan_data(
    data: bytes,
    start: int,
    *,
    frame: Frame,
    scan: Scan,
    tables: dict[tuple[int, int], list],
    restart_interval: int,
    find_marker,
) -> tuple[bytes, int]:
    """The scan's entropy-coded data from ``start`` without the bytes a decoder skips, and
    the position of the marker that ends it. ``find_marker(data, pos)`` is where the next
    marker other than a stuffed byte stands, restart markers included."""
    if frame.kind != _PROGRESSIVE:
        return _sequential_scan_data(
            data,
            start,
            frame=frame,
            scan=scan,
            tables=tables,
            restart_interval=restart_interval,
            find_marker=find_marker,
        )
    for component, _, _ in scan.components:
        if component.nonzero is None:
            component.nonzero = bytearray(64 * component.blocks_wide * component.blocks_high)
    per_mcu = _blocks_per_mcu(scan)
    total = _block_count(frame, scan)
    per_interval = restart_interval * per_mcu if restart_interval else total
    kept: list[bytes] = []
    pos = start
    walker = _ProgressiveWalker(scan, tables)
    bits: _Bits | None = None
    marker = start
    done = 0
    for component, dc, ac, index in _blocks(frame, scan):
        if bits is None:
            marker = find_marker(data, pos)
            bits = _Bits(data, pos, marker)
            walker.reset()
        walker.block(bits, component, dc, ac, index)
        done += 1
        if done % per_interval and done < total:
            continue
        kept.append(data[pos : bits.end()])
        bits = None
        if done < total:  # a restart marker follows
            if not 0xD0 <= data[marker + 1] <= 0xD7:
                raise ScanError("a restart marker is missing")
            kept.append(data[marker : marker + 2])
            pos = marker + 2
        else:
            pos = marker
    return b"".join(kept), pos


def _sequential_scan_data(
    data: bytes,
    start: int,
    *,
    frame: Frame,
    scan: Scan,
    tables: dict[tuple[int, int], list],
    restart_interval: int,
    find_marker,
) -> tuple[bytes, int]:
    """``jpeg_scan_data`` for a sequential scan, the common case, with the bit reading
    inlined: a 1024 x 1024 photograph has about half a million codes."""
    pattern = []  # the (DC, AC) walking tables of each block of one MCU
    for component, dc, ac in scan.components:
        blocks = 1 if len(scan.components) == 1 else component.h * component.v
        pattern += [(_walking_table(tables, 0, dc), _walking_table(tables, 1, ac))] * blocks
    if len(scan.components) == 1:
        component = scan.components[0][0]
        mcus = _own_blocks(frame, component, wide=True) * _own_blocks(frame, component, wide=False)
    else:
        mcus = _block_count(frame, scan) // len(pattern)
    per_interval = restart_interval or mcus
    kept: list[bytes] = []
    pos = start
    for first in range(0, mcus, per_interval):
        marker = find_marker(data, pos)
        unstuffed = data[pos:marker].replace(b"\xff\x00", b"\xff")
        used = _walk_sequential(unstuffed, min(per_interval, mcus - first), pattern)
        used_bytes = -(-used // 8)
        if used_bytes > len(unstuffed):
            raise ScanError("the scan's data ends before its last block")
        kept.append(data[pos : pos + used_bytes + unstuffed[:used_bytes].count(b"\xff")])
        if first + per_interval < mcus:
            if not 0xD0 <= data[marker + 1] <= 0xD7:
                raise ScanError("a restart marker is missing")
            kept.append(data[marker : marker + 2])
            pos = marker + 2
        else:
            pos = marker
    return b"".join(kept), pos


def _walking_table(tables: dict[tuple[int, int], list], kind: int, ident: int) -> list:
    try:
        return tables[(_WALKING + kind, ident)]
    except KeyError:
        raise ScanError(f"no Huffman table {kind}/{ident}") from None


def _walk_sequential(unstuffed: bytes, mcus: int, pattern: list) -> int:
    """The bits the codes of ``mcus`` MCUs take from the start of ``unstuffed``."""
    buf = unstuffed + b"\xff" * 16
    end = len(buf) - 8
    acc = nbits = p = 0
    for _ in range(mcus):
        for dc, ac in pattern:
            if nbits < 32:
                if p > end:
                    raise ScanError("the scan's data ends before its last block")
                acc = ((acc & ((1 << nbits) - 1)) << 64) | int.from_bytes(buf[p : p + 8], "big")
                p += 8
                nbits += 64
            taken, _ = dc[(acc >> (nbits - 16)) & 0xFFFF]
            if not taken:
                raise ScanError("a code that is not in the Huffman table")
            nbits -= taken
            k = 1
            while k < 64:
                if nbits < 32:
                    if p > end:
                        raise ScanError("the scan's data ends before its last block")
                    acc = ((acc & ((1 << nbits) - 1)) << 64) | int.from_bytes(buf[p : p + 8], "big")
                    p += 8
                    nbits += 64
                taken, advance = ac[(acc >> (nbits - 16)) & 0xFFFF]
                if not taken:
                    raise ScanError("a code that is not in the Huffman table")
                nbits -= taken
                if not advance:
                    break
                k += advance
            if k > 64:
                raise ScanError("a block with more than 64 coefficients")
    return p * 8 - nbits


def _block_count(frame: Frame, scan: Scan) -> int:
    if len(scan.components) == 1:
        component = scan.components[0][0]
        return _own_blocks(frame, component, wide=True) * _own_blocks(frame, component, wide=False)
    mcus = -(-frame.width // (8 * frame.h_max)) * -(-frame.height // (8 * frame.v_max))
    return mcus * _blocks_per_mcu(scan)


def _own_blocks(frame: Frame, component: Component, *, wide: bool) -> int:
    """A component's blocks across (or down) the image, without the MCU padding."""
    if wide:
        samples = -(-frame.width * component.h // frame.h_max)
    else:
        samples = -(-frame.height * component.v // frame.v_max)
    return -(-samples // 8)


def _blocks_per_mcu(scan: Scan) -> int:
    if len(scan.components) == 1:
        return 1
    return sum(c.h * c.v for c, _, _ in scan.components)


def _blocks(frame: Frame, scan: Scan):
    """(component, DC table, AC table, block index) in the order the scan codes them."""
    if len(scan.components) == 1:
        component, dc, ac = scan.components[0]
        # A lone component's scan covers only its own blocks, not the MCU padding.
        for row in range(_own_blocks(frame, component, wide=False)):
            for column in range(_own_blocks(frame, component, wide=True)):
                yield component, dc, ac, row * component.blocks_wide + column
        return
    mcus_wide = -(-frame.width // (8 * frame.h_max))
    mcus_high = -(-frame.height // (8 * frame.v_max))
    for mcu_row in range(mcus_high):
        for mcu_column in range(mcus_wide):
            for component, dc, ac in scan.components:
                for y in range(component.v):
                    for x in range(component.h):
                        row = mcu_row * component.v + y
                        column = mcu_column * component.h + x
                        yield component, dc, ac, row * component.blocks_wide + column


class _ProgressiveWalker:
    """Walks the blocks of one progressive scan; AC scans code one component."""

    def __init__(self, scan: Scan, tables: dict[tuple[int, int], list]):
        self.scan = scan
        self.tables = tables
        self.eobrun = 0

    def reset(self) -> None:
        self.eobrun = 0

    def _table(self, kind: int, ident: int) -> list:
        try:
            return self.tables[(kind, ident)]
        except KeyError:
            raise ScanError(f"no Huffman table {kind}/{ident}") from None

    def block(self, bits: _Bits, component: Component, dc: int, ac: int, index: int) -> None:
        scan = self.scan
        if scan.ss == 0:  # DC scans: first pass codes differences, refinement one bit
            if scan.ah == 0:
                bits.skip(bits.symbol(self._table(0, dc)))
            else:
                bits.skip(1)
            return
        if scan.se > 63 or scan.ss > scan.se or len(scan.components) != 1:
            raise ScanError("an AC scan of a wrong band or of several components")
        nonzero = component.nonzero
        assert nonzero is not None
        base = 64 * index
        if scan.ah == 0:
            self._ac_first(bits, self._table(1, ac), nonzero, base)
        else:
            self._ac_refine(bits, self._table(1, ac), nonzero, base)

    def _ac_first(self, bits: _Bits, lut: list, nonzero: bytearray, base: int) -> None:
        if self.eobrun:
            self.eobrun -= 1
            return
        k, se = self.scan.ss, self.scan.se
        while k <= se:
            rs = bits.symbol(lut)
            r, size = rs >> 4, rs & 15
            if size:
                k += r
                if k > se:
                    raise ScanError("a coefficient past the band")
                bits.skip(size)
                nonzero[base + k] = 1
                k += 1
            elif r == 15:
                k += 16
            else:
                self.eobrun = (1 << r) + bits.take(r) - 1
                return

    def _ac_refine(self, bits: _Bits, lut: list, nonzero: bytearray, base: int) -> None:
        """libjpeg's decode_mcu_AC_refine, reading no value: a correction bit follows for
        every coefficient already nonzero that a run passes over."""
        k, se = self.scan.ss, self.scan.se
        limit = base + se + 1
        if not self.eobrun:
            while k <= se:
                rs = bits.symbol(lut)
                r, size = rs >> 4, rs & 15
                if size:
                    if size != 1:
                        raise ScanError("a refinement coefficient of a wrong size")
                elif r != 15:
                    self.eobrun = 1 << r
                    if r:
                        self.eobrun += bits.take(r)
                    break
                # Pass r + 1 coefficients still zero (r for ZRL's 16), counting the nonzero.
                at = base + k
                passed = 0
                while True:
                    zero = nonzero.find(0, at, limit)
                    if zero < 0:
                        passed += limit - at
                        k = se + 1
                        break
                    passed += zero - at
                    if r == 0:
                        k = zero - base
                        break
                    r -= 1
                    at = zero + 1
                bits.skip(passed + (1 if size else 0))
                if size and k <= se:
                    nonzero[base + k] = 1
                k += 1
        if self.eobrun:
            if k <= se:
                bits.skip(nonzero[base + k : limit].count(1))
            self.eobrun -= 1

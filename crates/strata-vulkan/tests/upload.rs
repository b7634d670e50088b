//! Streamed uploads (`strata_vulkan::upload::stream`): bytes arrive whole, in order, at any
//! length and piece size (several pieces reuse the two staging buffers in turn).

mod common;

use strata_vulkan::{transfer, upload, Buffer, Location};

/// Bytes that differ at every offset of a piece and between pieces.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn streamed_uploads_arrive_whole_in_pieces_of_any_size() {
    let Some(dev) = common::device() else { return };
    // (length, piece): one piece, exactly two, five with a ragged tail, a length that is no
    // whole word, a piece that is no whole word (rounded down to one), a piece larger than
    // the data.
    for (n, piece) in [
        (4096, 1 << 20),
        (2 << 20, 1 << 20),
        ((4 << 20) + 12, 1 << 20),
        (1001, 256),
        (999, 30),
        (64, 1 << 24),
    ] {
        let bytes = pattern(n);
        let dst = Buffer::new(&dev, n as u64, Location::Device).expect("buffer");
        upload::stream(&dev, &dst, &bytes, piece).expect("stream");
        let back = transfer::read(&dev, &dst, n.div_ceil(4) * 4).expect("read");
        assert!(back[..n] == bytes[..], "{n} bytes in pieces of {piece}");
        assert!(
            back[n..].iter().all(|&b| b == 0),
            "the last word is padded with zeros"
        );
    }
    // Too much for the buffer: an error, nothing written.
    let dst = Buffer::new(&dev, 16, Location::Device).expect("buffer");
    assert!(upload::stream(&dev, &dst, &pattern(17 + 3), 8).is_err());
    // transfer::upload streams too.
    let bytes = pattern(3 << 20);
    let buf = transfer::upload(&dev, &bytes).expect("upload");
    assert!(transfer::read(&dev, &buf, bytes.len()).expect("read") == bytes);
}

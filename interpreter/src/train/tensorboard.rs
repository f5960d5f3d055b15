//! TensorBoard event files, written by hand: `tensorboard --logdir runs` reads them.
//!
//! A file is a sequence of TFRecords (`u64` length, masked CRC-32C of the length, the data,
//! masked CRC-32C of the data, all little-endian), each holding an `Event` protobuf:
//! `wall_time` (double, field 1), `step` (int64, field 2), `file_version` (string, field 3) in
//! the first record, `summary` (field 5) in the others: a `Summary` of repeated `Value`s
//! (field 1), each a `tag` (string, field 1) and a `simple_value` (float, field 2). That is the
//! whole of the format scalars need, so no protobuf crate.

use std::io::Write;
use std::path::Path;

/// Appends scalars to one `events.out.tfevents.*` file.
pub struct EventWriter {
    file: std::fs::File,
}

impl EventWriter {
    /// A new event file in `dir`, named as TensorFlow names them (TensorBoard lists a directory's
    /// files whose names contain `tfevents`), starting with the version record.
    pub fn create(dir: &Path) -> std::io::Result<EventWriter> {
        let now = wall_time();
        let host =
            std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "localhost".into());
        let path = dir.join(format!("events.out.tfevents.{:010}.{host}.{}.0", now as u64, std::process::id()));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
        let mut w = EventWriter { file };
        let mut event = vec![];
        double(&mut event, 1, now);
        bytes(&mut event, 3, b"brain.Event:2");
        w.record(&event)?;
        Ok(w)
    }

    /// One event at `step` with these scalars.
    pub fn scalars(&mut self, step: i64, values: &[(String, f32)]) -> std::io::Result<()> {
        let mut summary = vec![];
        for (tag, v) in values {
            let mut value = vec![];
            bytes(&mut value, 1, tag.as_bytes());
            value.push(2 << 3 | 5);
            value.extend(v.to_le_bytes());
            bytes(&mut summary, 1, &value);
        }
        let mut event = vec![];
        double(&mut event, 1, wall_time());
        event.push(2 << 3);
        varint(&mut event, step as u64);
        bytes(&mut event, 5, &summary);
        self.record(&event)
    }

    /// One TFRecord, flushed so that a TensorBoard watching the run sees it.
    fn record(&mut self, data: &[u8]) -> std::io::Result<()> {
        let len = (data.len() as u64).to_le_bytes();
        let mut r = Vec::with_capacity(data.len() + 16);
        r.extend(len);
        r.extend(masked_crc(&len).to_le_bytes());
        r.extend(data);
        r.extend(masked_crc(data).to_le_bytes());
        self.file.write_all(&r)?;
        self.file.flush()
    }
}

fn wall_time() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field (wire type 2).
fn bytes(out: &mut Vec<u8>, field: u64, data: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// A 64-bit field (wire type 1).
fn double(out: &mut Vec<u8>, field: u64, v: f64) {
    varint(out, field << 3 | 1);
    out.extend(v.to_le_bytes());
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses.
fn crc32c(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0x82F6_3B78 ^ (c >> 1) } else { c >> 1 };
            }
            *e = c;
        }
        t
    });
    !data.iter().fold(!0u32, |c, b| table[((c ^ *b as u32) & 0xff) as usize] ^ (c >> 8))
}

/// TFRecord's masking, so that a CRC of data holding CRCs stays strong.
fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The check value of CRC-32C (RFC 3720's iSCSI CRC) over the ASCII digits 1 to 9.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        let mut v = vec![];
        varint(&mut v, 300);
        assert_eq!(v, [0xAC, 0x02]);
    }
}

//! An append-only JSON-lines file shared by processes: every write is one line, appended and
//! synced under an exclusive file lock; every reader replays the lines it has not seen yet. A
//! line torn by a kill -9 was never acknowledged (the writer had not returned), so it is cut off
//! by the next writer, under the lock, before its own append.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub struct Journal {
    path: PathBuf,
    file: File,
    /// Bytes already replayed (always at a line boundary).
    offset: u64,
}

impl Journal {
    pub fn open(path: &Path) -> Result<Journal, String> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            offset: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines appended since the last call, complete lines only.
    pub fn read_new(&mut self) -> Result<Vec<String>, String> {
        let len = self.file.metadata().map_err(|e| self.io("stat", e))?.len();
        if len <= self.offset {
            return Ok(Vec::new());
        }
        self.file
            .seek(SeekFrom::Start(self.offset))
            .map_err(|e| self.io("seek", e))?;
        let mut buf = Vec::with_capacity((len - self.offset) as usize);
        (&self.file)
            .take(len - self.offset)
            .read_to_end(&mut buf)
            .map_err(|e| self.io("read", e))?;
        // Only whole lines: a torn tail stays unread until it is completed or cut off.
        let Some(end) = buf.iter().rposition(|b| *b == b'\n') else {
            return Ok(Vec::new());
        };
        self.offset += end as u64 + 1;
        let text = String::from_utf8_lossy(&buf[..end]);
        Ok(text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Run `f` holding the file lock (exclusive for writers, shared for readers).
    pub fn locked<T>(
        &mut self,
        exclusive: bool,
        f: impl FnOnce(&mut Journal) -> T,
    ) -> Result<T, String> {
        let locked = if exclusive {
            self.file.lock()
        } else {
            self.file.lock_shared()
        };
        locked.map_err(|e| self.io("lock", e))?;
        let out = f(self);
        let _ = self.file.unlock();
        Ok(out)
    }

    /// Append one line and make it durable. Call under the exclusive lock, after `read_new`.
    pub fn append(&mut self, line: &str) -> Result<(), String> {
        assert!(!line.contains('\n'), "a journal entry is one line");
        let len = self.file.metadata().map_err(|e| self.io("stat", e))?.len();
        if len > self.offset {
            // A torn line from a writer that died mid-append: it never committed.
            self.file
                .set_len(self.offset)
                .map_err(|e| self.io("truncate a torn line of", e))?;
        }
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.file
            .write_all(&bytes)
            .map_err(|e| self.io("append to", e))?;
        self.file.sync_data().map_err(|e| self.io("sync", e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn io(&self, what: &str, e: std::io::Error) -> String {
        format!("cannot {what} {}: {e}", self.path.display())
    }
}

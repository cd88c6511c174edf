//! Keeping the store on disk, so a restarted server serves the same objects.
//!
//! Cases that restart the control plane under a running CCM need what etcd gives a
//! real API server: the objects (with their UIDs) survive, and resourceVersions keep
//! increasing. The layout is a snapshot plus a write-ahead journal:
//!
//! - `snapshot.json`: `{"revision": N, "objects": [{"resource": KEY, "object": {...}}]}`
//! - `journal.jsonl`: one line per committed write, `{"revision": N, "resource": KEY,
//!   "namespace": NS, "name": NAME, "object": {...} | null}` (null: deleted).
//!
//! Every write appends its line before the request is answered (no fsync: this
//! survives a process exit, not a power cut). Loading replays the journal over the
//! snapshot, then writes a fresh snapshot and empties the journal. A torn last line
//! (a process killed mid-write) is ignored; any other unreadable line is an error.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::resources::{self, ResourceDesc};

const SNAPSHOT: &str = "snapshot.json";
const JOURNAL: &str = "journal.jsonl";

#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: line {line}: {detail}", path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        detail: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> PersistError + '_ {
    move |source| PersistError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `(resource key, namespace, name)`.
pub type StoredKey = (String, String, String);

/// What a data directory held.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The newest revision written (0 for an empty directory).
    pub revision: u64,
    pub objects: BTreeMap<StoredKey, (&'static ResourceDesc, Value)>,
}

/// The append side of a data directory.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Record one committed write; `object: None` is a delete.
    pub fn append(
        &mut self,
        revision: u64,
        desc: &ResourceDesc,
        namespace: &str,
        name: &str,
        object: Option<&Value>,
    ) -> Result<(), PersistError> {
        let mut line = json!({
            "revision": revision,
            "resource": desc.key(),
            "namespace": namespace,
            "name": name,
            "object": object,
        })
        .to_string();
        line.push('\n');
        // One write per record, so concurrent readers never see half a line from us.
        self.file
            .write_all(line.as_bytes())
            .map_err(io_err(&self.path))
    }
}

/// Load `dir` (created if missing), compact it, and open its journal for appending.
pub fn open(dir: &Path) -> Result<(Loaded, Journal), PersistError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let snapshot_path = dir.join(SNAPSHOT);
    let journal_path = dir.join(JOURNAL);
    let mut loaded = read_snapshot(&snapshot_path)?;
    replay_journal(&journal_path, &mut loaded)?;
    write_snapshot(&snapshot_path, &loaded)?;
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&journal_path)
        .map_err(io_err(&journal_path))?;
    // Reopen in append mode so every write lands at the end.
    drop(file);
    let file = OpenOptions::new()
        .append(true)
        .open(&journal_path)
        .map_err(io_err(&journal_path))?;
    Ok((
        loaded,
        Journal {
            path: journal_path,
            file,
        },
    ))
}

fn corrupt(path: &Path, line: usize, detail: impl Into<String>) -> PersistError {
    PersistError::Corrupt {
        path: path.to_path_buf(),
        line,
        detail: detail.into(),
    }
}

fn resource(path: &Path, line: usize, v: &Value) -> Result<&'static ResourceDesc, PersistError> {
    let key = v.get("resource").and_then(Value::as_str).unwrap_or("");
    resources::by_key(key).ok_or_else(|| corrupt(path, line, format!("unknown resource {key:?}")))
}

fn meta<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn read_snapshot(path: &Path) -> Result<Loaded, PersistError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(e) => return Err(io_err(path)(e)),
    };
    let doc: Value = serde_json::from_str(&text).map_err(|e| corrupt(path, 1, e.to_string()))?;
    let mut loaded = Loaded {
        revision: doc
            .get("revision")
            .and_then(Value::as_u64)
            .ok_or_else(|| corrupt(path, 1, "no revision"))?,
        objects: BTreeMap::new(),
    };
    for entry in doc
        .get("objects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let desc = resource(path, 1, entry)?;
        let obj = entry
            .get("object")
            .filter(|o| o.is_object())
            .ok_or_else(|| corrupt(path, 1, "an entry without an object"))?;
        let key = (
            desc.key(),
            meta(obj, "namespace").to_string(),
            meta(obj, "name").to_string(),
        );
        loaded.objects.insert(key, (desc, obj.clone()));
    }
    Ok(loaded)
}

fn replay_journal(path: &Path, loaded: &mut Loaded) -> Result<(), PersistError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(path)(e)),
    };
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(io_err(path))?;
    let count = lines.len();
    for (i, text) in lines.iter().enumerate() {
        let line = i + 1;
        let record: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            // A torn final line: the write that was cut off was never answered.
            Err(_) if line == count => break,
            Err(e) => return Err(corrupt(path, line, e.to_string())),
        };
        let revision = record
            .get("revision")
            .and_then(Value::as_u64)
            .ok_or_else(|| corrupt(path, line, "no revision"))?;
        if revision <= loaded.revision {
            // Already in the snapshot (a crash between snapshot and truncation).
            continue;
        }
        let desc = resource(path, line, &record)?;
        let field = |f: &str| {
            record
                .get(f)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let key = (desc.key(), field("namespace"), field("name"));
        match record.get("object") {
            Some(obj) if obj.is_object() => {
                loaded.objects.insert(key, (desc, obj.clone()));
            }
            _ => {
                loaded.objects.remove(&key);
            }
        }
        loaded.revision = revision;
    }
    Ok(())
}

/// Write atomically: temporary file, then rename over the old snapshot.
fn write_snapshot(path: &Path, loaded: &Loaded) -> Result<(), PersistError> {
    let objects: Vec<Value> = loaded
        .objects
        .values()
        .map(|(desc, obj)| json!({"resource": desc.key(), "object": obj}))
        .collect();
    let doc = json!({"revision": loaded.revision, "objects": objects});
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, doc.to_string()).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> &'static ResourceDesc {
        resources::lookup("", "v1", "nodes").expect("nodes")
    }

    #[test]
    fn journal_replays_over_the_snapshot_and_compacts() {
        let dir = tempfile::tempdir().expect("dir");
        {
            let (loaded, mut journal) = open(dir.path()).expect("open");
            assert_eq!(loaded.revision, 0);
            let n1 = json!({"metadata": {"name": "n1", "uid": "u1"}});
            let n2 = json!({"metadata": {"name": "n2", "uid": "u2"}});
            journal.append(1, nodes(), "", "n1", Some(&n1)).expect("a");
            journal.append(2, nodes(), "", "n2", Some(&n2)).expect("b");
            journal.append(3, nodes(), "", "n1", None).expect("c");
        }
        let (loaded, _journal) = open(dir.path()).expect("reopen");
        assert_eq!(loaded.revision, 3);
        let names: Vec<&str> = loaded.objects.keys().map(|k| k.2.as_str()).collect();
        assert_eq!(names, vec!["n2"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(JOURNAL)).expect("journal"),
            ""
        );
        // A third open reads the same state from the snapshot alone.
        let (again, _) = open(dir.path()).expect("third");
        assert_eq!(again.revision, 3);
        assert_eq!(again.objects.len(), 1);
    }

    #[test]
    fn a_torn_last_line_is_ignored_but_a_corrupt_middle_is_an_error() {
        let dir = tempfile::tempdir().expect("dir");
        let line = |rv: u64| {
            json!({"revision": rv, "resource": "nodes", "namespace": "", "name": format!("n{rv}"),
                   "object": {"metadata": {"name": format!("n{rv}")}}})
            .to_string()
        };
        std::fs::write(
            dir.path().join(JOURNAL),
            format!("{}\n{}\n{{\"revision\": 3, \"reso", line(1), line(2)),
        )
        .expect("write");
        let (loaded, _) = open(dir.path()).expect("open");
        assert_eq!((loaded.revision, loaded.objects.len()), (2, 2));

        let bad = tempfile::tempdir().expect("dir");
        std::fs::write(
            bad.path().join(JOURNAL),
            format!("{}\nnot json\n{}\n", line(1), line(2)),
        )
        .expect("write");
        assert!(matches!(
            open(bad.path()),
            Err(PersistError::Corrupt { line: 2, .. })
        ));
        let unknown = tempfile::tempdir().expect("dir");
        std::fs::write(
            unknown.path().join(JOURNAL),
            "{\"revision\":1,\"resource\":\"widgets\",\"object\":null}\n{}\n",
        )
        .expect("write");
        assert!(open(unknown.path()).is_err());
    }
}

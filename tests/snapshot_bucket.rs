//! Snapshots in object storage (moto's S3 server from PyPI, a Tansu broker): the kg-writer
//! uploads each periodic snapshot to the bucket and keeps the newest `--snapshot-keep`; a query
//! replica that shares no disk with it bootstraps from the newest snapshot in the bucket that
//! reads whole, follows the deltas after it and answers like the writer; a truncated table in
//! the newest snapshot gets it refused, with the reason, and the one before is used.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use streamrag::synth;
use streamrag_operators::bucket::SnapshotBucket;

/// The bucket's snapshots, oldest first, with each one's document count (0 when its manifest
/// is not there yet).
fn listed(bucket: &SnapshotBucket, scratch: &Path) -> Vec<(String, usize)> {
    rt().block_on(async {
        let mut out = Vec::new();
        for name in bucket.snapshots().await.unwrap() {
            let docs = match bucket.download(&name, scratch).await {
                Ok(dir) => streamrag_operators::snapshot::read_manifest(&dir).map(|m| m.stats.documents).unwrap_or(0),
                Err(_) => 0,
            };
            out.push((name, docs));
        }
        out
    })
}

#[test]
fn a_replica_without_a_shared_disk_bootstraps_from_the_bucket_and_refuses_a_truncated_snapshot() {
    let (_s3, endpoint) = start_s3(&["snaps"]);
    for (k, v) in [("AWS_ENDPOINT", endpoint.as_str()), ("AWS_ALLOW_HTTP", "true"), ("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_DEFAULT_REGION", "us-east-1")] {
        std::env::set_var(k, v);
    }
    let url = "s3://snaps/streamrag/graph";
    let bucket = SnapshotBucket::open(url).unwrap();
    let (_broker, brokers) = start_broker();
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let (docs, questions) = synth::corpus(300, 5);
    let (f1, f2) = (dir.path().join("p1.jsonl"), dir.path().join("p2.jsonl"));
    write_jsonl(&f1, &docs[..200]);
    write_jsonl(&f2, &docs[200..]);
    // the writer: no --snapshot-dir, so its snapshots are staged under its data directory only
    let (mut writer, wa) = start_run(&["--brokers", &brokers, "--data", dir.path().join("writer").to_str().unwrap(), "--snapshot-url", url, "--snapshot-every-s", "1", "--snapshot-keep", "2"]);
    let newest_with = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let l = listed(&bucket, &scratch);
            // and pruned: a snapshot is uploaded first, the old ones deleted after it
            if l.last().is_some_and(|(_, d)| *d == n) && l.len() <= 2 {
                return l;
            }
            assert!(Instant::now() < deadline, "no snapshot of {n} documents in the bucket, or more than the newest two kept: {l:?}");
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    streamrag(&["ingest", "--brokers", &brokers, f1.to_str().unwrap()]);
    wait_stats(&wa, Duration::from_secs(120), |s| s.documents == 200);
    let first = newest_with(200).last().unwrap().0.clone();
    let first_offsets = rt().block_on(bucket.download(&first, &scratch)).map(|d| streamrag_operators::snapshot::read_manifest(&d).unwrap().offsets).unwrap();
    streamrag(&["ingest", "--brokers", &brokers, f2.to_str().unwrap()]);
    let want = wait_stats(&wa, Duration::from_secs(120), |s| s.documents == 300);
    let l = newest_with(300);
    assert!(l.iter().any(|(n, _)| *n == first), "the 200-document snapshot is still kept: {l:?}");
    let newest = l.last().unwrap().0.clone();
    // the writer keeps running (its graph no longer changes, so it writes no more snapshots):
    // its answers are compared with the replica's once both have indexed every passage

    // A truncated table in the newest snapshot (its manifest still says it is whole), and a
    // newer one whose upload died before its manifest.
    // (through boto3, which moto brings: a client independent of ours)
    let key = format!("streamrag/graph/{newest}/triples.parquet");
    let py = std::env::var("STREAMRAG_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = "import boto3, sys\n\
        s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n\
        body = s3.get_object(Bucket='snaps', Key=sys.argv[2])['Body'].read()\n\
        s3.put_object(Bucket='snaps', Key=sys.argv[2], Body=body[: len(body) // 2])\n\
        s3.put_object(Bucket='snaps', Key='streamrag/graph/snap-999999999999999/triples.parquet', Body=body)\n\
        print(len(body))\n";
    let o = Command::new(&py).args(["-c", script, &endpoint, &key]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let size: usize = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert!(size > 100, "{key}: {size} bytes");

    // The replica: its own data directory, no snapshot directory, only the bucket.
    let log = dir.path().join("replica.log");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut replica = Proc {
        child: Command::new(bin())
            .args(["run", "--brokers", &brokers, "--stages", "query", "--data", dir.path().join("replica").to_str().unwrap(), "--snapshot-url", url, "--http", &addr])
            .env("STREAMRAG_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
        name: "query replica".into(),
    };
    wait_http(&addr, Duration::from_secs(120));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("snapshot refused") && text.contains(&newest), "the truncated snapshot is refused with its name: {text}");
    assert!(text.contains("snap-999999999999999 in s3://snaps/streamrag/graph has no manifest.json"), "the partial upload is passed over: {text}");
    let health: Value = serde_json::from_str(&blocking_get(&format!("http://{addr}/health")).unwrap()).unwrap();
    assert_eq!(health["started_from_snapshot"], serde_json::to_value(&first_offsets).unwrap(), "it started from the snapshot before");
    let got = wait_stats(&addr, Duration::from_secs(60), |s| s.digest == want.digest);
    assert_same_graph(&got, &want);
    assert_same_graph(&got, &expected(&docs));

    // and it answers as the writer does, once the passage indexes of both (each kept from the
    // docs topic) have caught up
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let w = ask_all(&["--http", &wa], &questions[..5]);
        let r = ask_all(&["--http", &addr], &questions[..5]);
        if w == r {
            break;
        }
        assert!(Instant::now() < deadline, "replica {r:?}, writer {w:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    replica.stop();
    writer.stop();
}

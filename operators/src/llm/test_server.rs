//! An OpenAI-compatible HTTP server on 127.0.0.1 for unit tests of the code that talks to one:
//! each request is answered by a function of (request number, request body).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with a chat completion whose message content is this.
    Ok(String),
    Status(u16, &'static str),
    /// 200 with a body that is not JSON.
    Garbage,
    /// Never answers.
    Hang,
    /// 200 with this content after a delay.
    Slow(u64, String),
}

impl Reply {
    pub fn ok(content: &str) -> Self {
        Reply::Ok(content.to_string())
    }
}

pub type Handler = Arc<dyn Fn(usize, &str) -> Reply + Send + Sync>;

/// Serves `handler`; returns the base URL (`http://127.0.0.1:PORT/v1`) and the request texts seen.
pub async fn serve(handler: Handler) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let (seen, handler) = (seen2.clone(), handler.clone());
            tokio::spawn(async move {
                let req = read_request(&mut sock).await;
                let n = {
                    let mut s = seen.lock().unwrap();
                    s.push(req.clone());
                    s.len() - 1
                };
                let body_text = req.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
                let (status, body) = match handler(n, body_text) {
                    Reply::Ok(content) => (200, completion(&content)),
                    Reply::Slow(ms, content) => {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        (200, completion(&content))
                    }
                    Reply::Status(s, b) => (s, b.to_string()),
                    Reply::Garbage => (200, "{\"id\": \"c1\", \"choices\": [tru".to_string()),
                    Reply::Hang => {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(body.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (format!("http://{addr}/v1"), seen)
}

/// Serves the replies in order; the last one repeats.
pub async fn scripted(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<String>>>) {
    serve(Arc::new(move |n, _| replies[n.min(replies.len() - 1)].clone())).await
}

fn completion(content: &str) -> String {
    serde_json::json!({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    })
    .to_string()
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = sock.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()))
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return text.into_owned();
            }
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

//! `run --kubeconfig in-cluster`: the harness as a pod (the Sonobuoy plugin,
//! `ci/sonobuoy/ccm-conformance.yaml`) reaches its cluster as client-go's
//! `rest.InClusterConfig` does: the API server at `KUBERNETES_SERVICE_HOST` and
//! `KUBERNETES_SERVICE_PORT`, the service account's `token` and `ca.crt` from
//! `/var/run/secrets/kubernetes.io/serviceaccount`. It writes them as a kubeconfig (the
//! token by file, so a projected token that rotates is read again) and external mode runs
//! from that. Only when asked: a harness that runs in a CI pod (Prow's) sees the same
//! variables and must still run hermetically.
//!
//! `CCM_CONFORMANCE_SERVICEACCOUNT_DIR` moves the directory, so tests can play the pod.

use std::path::{Path, PathBuf};

/// Where a pod's service-account credentials are mounted.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The `--kubeconfig` value that asks for the pod's own credentials.
pub const IN_CLUSTER: &str = "in-cluster";

/// Writes `dir/in-cluster.kubeconfig` from the pod's environment (`env` reads a variable)
/// and returns its path; the error is one line saying what is missing.
pub fn write_kubeconfig(
    dir: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let (Some(host), Some(port)) = (
        var("KUBERNETES_SERVICE_HOST"),
        var("KUBERNETES_SERVICE_PORT"),
    ) else {
        return Err(
            "--kubeconfig in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not running in a pod?)"
                .into(),
        );
    };
    let sa = var("CCM_CONFORMANCE_SERVICEACCOUNT_DIR")
        .map_or_else(|| PathBuf::from(SERVICE_ACCOUNT_DIR), PathBuf::from);
    let (token, ca) = (sa.join("token"), sa.join("ca.crt"));
    for (file, what) in [(&token, "service-account token"), (&ca, "cluster CA")] {
        match std::fs::metadata(file) {
            Ok(m) if m.len() > 0 => {}
            _ => {
                return Err(format!(
                    "--kubeconfig in-cluster: no {what} at {} (is the service account token mounted?)",
                    file.display()
                ));
            }
        }
    }
    // An IPv6 service address goes in brackets (client-go: net.JoinHostPort).
    let server = if host.contains(':') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    };
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: in-cluster\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: in-cluster\n  user:\n    tokenFile: {token}\ncontexts:\n- name: in-cluster\n  context:\n    cluster: in-cluster\n    user: in-cluster\ncurrent-context: in-cluster\n",
        ca = ca.display(),
        token = token.display(),
    );
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join("in-cluster.kubeconfig");
    std::fs::write(&path, yaml).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pods_variables_and_files_make_a_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let sa = dir.path().join("sa");
        std::fs::create_dir_all(&sa).unwrap();
        std::fs::write(sa.join("token"), "t0k3n").unwrap();
        std::fs::write(sa.join("ca.crt"), "-----BEGIN CERTIFICATE-----\n").unwrap();
        let env = |host: &'static str| {
            let sa = sa.display().to_string();
            move |k: &str| match k {
                "KUBERNETES_SERVICE_HOST" => Some(host.to_string()),
                "KUBERNETES_SERVICE_PORT" => Some("6443".to_string()),
                "CCM_CONFORMANCE_SERVICEACCOUNT_DIR" => Some(sa.clone()),
                _ => None,
            }
        };
        let path = write_kubeconfig(&dir.path().join("out"), env("10.96.0.1")).unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.contains("server: https://10.96.0.1:6443"), "{text}");
        assert!(
            text.contains(&format!("tokenFile: {}", sa.join("token").display())),
            "{text}"
        );
        let v6 = write_kubeconfig(&dir.path().join("v6"), env("fd00::1")).unwrap();
        assert!(
            std::fs::read_to_string(v6)
                .unwrap()
                .contains("https://[fd00::1]:6443")
        );
    }

    #[test]
    fn outside_a_pod_it_says_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_kubeconfig(dir.path(), |_| None).unwrap_err();
        assert!(err.contains("KUBERNETES_SERVICE_HOST"), "{err}");
        let sa = dir.path().display().to_string();
        let err = write_kubeconfig(dir.path(), move |k| match k {
            "KUBERNETES_SERVICE_HOST" => Some("10.0.0.1".into()),
            "KUBERNETES_SERVICE_PORT" => Some("443".into()),
            "CCM_CONFORMANCE_SERVICEACCOUNT_DIR" => Some(sa.clone()),
            _ => None,
        })
        .unwrap_err();
        assert!(err.contains("service-account token"), "{err}");
    }
}

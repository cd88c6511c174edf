//! The registry of clouds: the one list of every cloud this project knows. Adding a cloud
//! is its descriptor in its own file (next to its backend) and one line here; nothing else
//! outside the cloud's own folders names it.

use super::descriptor::CloudDescriptor;
use super::{aws, azure, gcp, openstack, vsphere};

/// Every known cloud, in the order the suites run them by default.
pub static CLOUDS: &[&CloudDescriptor] = &[
    &openstack::CLOUD,
    &aws::CLOUD,
    &vsphere::CLOUD,
    &azure::CLOUD,
    &gcp::CLOUD,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_each_cloud_has_one_upstream_ccm() {
        let mut names: Vec<&str> = CLOUDS
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "a name or alias given twice");
        for cloud in CLOUDS {
            let u = cloud.upstream.expect("an upstream CCM").ccm;
            assert_eq!(
                u.name, cloud.name,
                "its build cache entry is named after it"
            );
            assert!(
                u.binary.ends_with("cloud-controller-manager"),
                "{}",
                u.binary
            );
            assert!(cloud.has_mock(), "{}", cloud.name);
            // The binary is named after its main package, with the provider in front
            // where the package's own name lacks it (Azure's Makefile prefixes `azure-`);
            // a main written here names it after the provider.
            let main = u.package.rsplit('/').next().unwrap();
            match u.main {
                None => assert!(
                    u.binary == main || u.binary == format!("{}-{main}", cloud.name),
                    "{}: {} for {}",
                    cloud.name,
                    u.binary,
                    u.package
                ),
                Some(go) => {
                    assert!(go.contains("package main"));
                    assert!(go.contains(&format!("_ \"{}/{}\"", u.module, u.package)));
                    assert!(go.contains("HasClusterID"));
                }
            }
        }
    }

    #[test]
    fn azure_has_a_node_manager_from_the_same_release() {
        for cloud in CLOUDS {
            let up = cloud.upstream.unwrap();
            let Some(nm) = up.node_manager else {
                assert_ne!(cloud.name, "azure");
                continue;
            };
            assert_eq!(cloud.name, "azure");
            assert_eq!(
                (nm.module, nm.default_version),
                (up.ccm.module, up.ccm.default_version)
            );
            assert_eq!(nm.binary, "azure-cloud-node-manager");
            assert!(nm.package.ends_with("cloud-node-manager"));
            assert_ne!(nm.name, up.ccm.name, "its own cache entry");
            assert!(
                nm.ldflags("v1.36.5")
                    .contains("cloud-provider-azure/pkg/version.gitVersion=v1.36.5")
            );
        }
    }
}

//! `azure.json`, the Azure provider's cloud config, in upstream's format.
//!
//! Exists because CCMs are configured with upstream's file unchanged:
//! kubernetes-sigs/cloud-provider-azure `pkg/provider/config/azure.go` (`Config`),
//! `pkg/azclient/arm_conf.go` (`ARMClientConfig`: `cloud`, `tenantId`,
//! `resourceManagerEndpoint`) and `pkg/azclient/auth_conf.go` (`AzureAuthConfig`:
//! `aadClientId`, `aadClientSecret`, `useManagedIdentityExtension`,
//! `userAssignedIdentityID`). Upstream reads the file with `sigs.k8s.io/yaml`, so JSON and
//! YAML are both accepted and unknown fields are ignored; so here. `AZURE_TENANT_ID` and
//! `AZURE_CLIENT_ID` override the file as upstream's `GetTenantID` / `GetAADClientID` do.
//! Only what the reference CCM implements is accepted: `vmType` standard (upstream's
//! default `vmss` and `vmssflex` are refused with a clear error, not half-served) and the
//! Standard load-balancer SKU.

use serde::Deserialize;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("cannot read cloud config {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("cloud config is neither JSON nor YAML: {0}")]
    Syntax(String),
    #[error("cloud config: {0}")]
    Invalid(String),
}

/// The fields of `azure.json` the reference CCM reads (camelCase on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AzureConfig {
    /// Cloud name, matched against the `name` of the `/metadata/endpoints` entries.
    pub cloud: String,
    pub tenant_id: String,
    pub subscription_id: String,
    #[serde(rename = "aadClientId")]
    pub aad_client_id: String,
    #[serde(rename = "aadClientSecret")]
    pub aad_client_secret: String,
    pub resource_group: String,
    pub location: String,
    pub vm_type: String,
    pub vnet_name: String,
    pub vnet_resource_group: String,
    pub subnet_name: String,
    pub security_group_name: String,
    pub security_group_resource_group: String,
    pub route_table_name: String,
    pub route_table_resource_group: String,
    pub load_balancer_sku: String,
    /// Upstream `loadBalancerName`: replaces the cluster name as the LB name prefix.
    pub load_balancer_name: String,
    pub use_instance_metadata: bool,
    pub resource_manager_endpoint: String,
    pub use_managed_identity_extension: bool,
    #[serde(rename = "userAssignedIdentityID")]
    pub user_assigned_identity_id: String,
    /// Upstream `disableOutboundSNAT` (rules' `disableOutboundSnat`).
    #[serde(rename = "disableOutboundSNAT")]
    pub disable_outbound_snat: Option<bool>,
}

impl AzureConfig {
    /// Reads and validates the file; the warnings are for the startup log.
    pub fn load(path: &str) -> Result<(Self, Vec<String>), ConfigError> {
        if path.is_empty() {
            return Err(ConfigError::Invalid(
                "--cloud-config is required for --cloud-provider=azure".to_owned(),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Parses JSON (or YAML, as upstream's yaml.Unmarshal accepts both) and validates.
    pub fn parse(text: &str) -> Result<(Self, Vec<String>), ConfigError> {
        let mut config: AzureConfig = match serde_json::from_str(text) {
            Ok(c) => c,
            Err(json_err) => serde_saphyr::from_str(text).map_err(|yaml_err| {
                ConfigError::Syntax(format!("{json_err}; as YAML: {yaml_err}"))
            })?,
        };
        // pkg/azclient/arm_conf.go GetTenantID, auth_conf.go GetAADClientID.
        if let Ok(t) = std::env::var("AZURE_TENANT_ID")
            && !t.is_empty()
        {
            config.tenant_id = t;
        }
        if let Ok(c) = std::env::var("AZURE_CLIENT_ID")
            && !c.is_empty()
        {
            config.aad_client_id = c;
        }
        let warnings = config.validate()?;
        Ok((config, warnings))
    }

    fn validate(&mut self) -> Result<Vec<String>, ConfigError> {
        let mut warnings = Vec::new();
        let missing = |field: &str| ConfigError::Invalid(format!("{field} is required"));
        if self.subscription_id.is_empty() {
            return Err(missing("subscriptionId"));
        }
        if self.resource_group.is_empty() {
            return Err(missing("resourceGroup"));
        }
        if self.location.is_empty() {
            return Err(missing("location"));
        }
        if self.resource_manager_endpoint.is_empty() {
            return Err(ConfigError::Invalid(
                "resourceManagerEndpoint is required (the reference CCM has no built-in cloud endpoints)"
                    .to_owned(),
            ));
        }
        if !self.use_managed_identity_extension {
            if self.tenant_id.is_empty() {
                return Err(missing("tenantId"));
            }
            if self.aad_client_id.is_empty() || self.aad_client_secret.is_empty() {
                return Err(ConfigError::Invalid(
                    "aadClientId and aadClientSecret are required unless useManagedIdentityExtension is true"
                        .to_owned(),
                ));
            }
        }
        // pkg/provider/config/azure.go: vmType defaults to vmss upstream; only standard here.
        match self.vm_type.to_ascii_lowercase().as_str() {
            "standard" => self.vm_type = "standard".to_owned(),
            "" => {
                return Err(ConfigError::Invalid(
                    "vmType is unset, which upstream reads as \"vmss\"; the reference CCM implements only vmType \"standard\""
                        .to_owned(),
                ));
            }
            other => {
                return Err(ConfigError::Invalid(format!(
                    "vmType {other:?} is not implemented by the reference CCM (only \"standard\")"
                )));
            }
        }
        match self.load_balancer_sku.to_ascii_lowercase().as_str() {
            "standard" | "" => {
                if self.load_balancer_sku.is_empty() {
                    warnings.push(
                        "loadBalancerSku unset (upstream's default is standard); using standard"
                            .to_owned(),
                    );
                }
                self.load_balancer_sku = "standard".to_owned();
            }
            other => {
                return Err(ConfigError::Invalid(format!(
                    "loadBalancerSku {other:?} is not implemented by the reference CCM (only \"standard\")"
                )));
            }
        }
        if self.use_instance_metadata {
            warnings.push(
                "useInstanceMetadata=true ignored: the reference CCM asks ARM for every node"
                    .to_owned(),
            );
        }
        if self.vnet_resource_group.is_empty() {
            self.vnet_resource_group = self.resource_group.clone();
        }
        if self.security_group_resource_group.is_empty() {
            self.security_group_resource_group = self.resource_group.clone();
        }
        if self.route_table_resource_group.is_empty() {
            self.route_table_resource_group = self.resource_group.clone();
        }
        Ok(warnings)
    }

    /// Whether the token comes from the ADFS endpoint (upstream: tenant `adfs`).
    pub fn is_adfs(&self) -> bool {
        self.tenant_id.eq_ignore_ascii_case("adfs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"{
        "cloud": "AzureMock",
        "tenantId": "00000000-0000-0000-0000-000000000001",
        "subscriptionId": "00000000-0000-0000-0000-0000000000aa",
        "aadClientId": "ccm-client",
        "aadClientSecret": "s3cret",
        "resourceGroup": "rg-ccm",
        "location": "eastus",
        "vmType": "standard",
        "vnetName": "vnet-ccm",
        "subnetName": "subnet-ccm",
        "securityGroupName": "nsg-ccm",
        "routeTableName": "rt-ccm",
        "loadBalancerSku": "standard",
        "useInstanceMetadata": false,
        "resourceManagerEndpoint": "https://127.0.0.1:4443/",
        "useManagedIdentityExtension": false,
        "somethingUpstreamHasButWeDoNot": {"x": 1}
    }"#;

    #[test]
    fn parses_the_fields_and_ignores_unknown_ones() {
        let (c, warnings) = AzureConfig::parse(FULL).expect("parse");
        assert_eq!(c.tenant_id, "00000000-0000-0000-0000-000000000001");
        assert_eq!(c.aad_client_id, "ccm-client");
        assert_eq!(c.aad_client_secret, "s3cret");
        assert_eq!(c.resource_group, "rg-ccm");
        assert_eq!(c.vnet_resource_group, "rg-ccm");
        assert_eq!(c.security_group_name, "nsg-ccm");
        assert_eq!(c.route_table_name, "rt-ccm");
        assert_eq!(c.resource_manager_endpoint, "https://127.0.0.1:4443/");
        assert!(warnings.is_empty());
        assert!(!c.is_adfs());
    }

    #[test]
    fn yaml_is_accepted_like_upstream() {
        let yaml = "subscriptionId: s\nresourceGroup: rg\nlocation: eastus\nvmType: standard\n\
                    resourceManagerEndpoint: https://x/\nuseManagedIdentityExtension: true\n";
        let (c, _) = AzureConfig::parse(yaml).expect("yaml");
        assert!(c.use_managed_identity_extension);
        assert_eq!(c.load_balancer_sku, "standard");
    }

    #[test]
    fn clear_errors() {
        let without = |field: &str| {
            let mut v: serde_json::Value = serde_json::from_str(FULL).expect("json");
            if let Some(o) = v.as_object_mut() {
                o.remove(field);
            }
            AzureConfig::parse(&v.to_string())
        };
        assert_eq!(
            without("subscriptionId").err(),
            Some(ConfigError::Invalid("subscriptionId is required".into()))
        );
        assert!(
            matches!(without("aadClientSecret"), Err(ConfigError::Invalid(m)) if m.contains("aadClientSecret"))
        );
        assert!(matches!(without("vmType"), Err(ConfigError::Invalid(m)) if m.contains("vmss")));
        let vmss = FULL.replace(
            "\"standard\",\n        \"vnetName\"",
            "\"vmss\",\n        \"vnetName\"",
        );
        assert!(
            matches!(AzureConfig::parse(&vmss), Err(ConfigError::Invalid(m)) if m.contains("\"vmss\""))
        );
        let basic = FULL.replace(
            "\"loadBalancerSku\": \"standard\"",
            "\"loadBalancerSku\": \"basic\"",
        );
        assert!(
            matches!(AzureConfig::parse(&basic), Err(ConfigError::Invalid(m)) if m.contains("basic"))
        );
        assert!(matches!(
            AzureConfig::parse("{not json"),
            Err(ConfigError::Syntax(_))
        ));
        assert!(matches!(
            AzureConfig::load("/nonexistent/azure.json"),
            Err(ConfigError::Read { .. })
        ));
    }

    #[test]
    fn adfs_tenant() {
        let adfs = FULL.replace("00000000-0000-0000-0000-000000000001", "adfs");
        let (c, _) = AzureConfig::parse(&adfs).expect("parse");
        assert!(c.is_adfs());
    }
}

//! What a conformance case is: a name in the upstream e2e style, tags, and an async body
//! that gets a ready [`Environment`](crate::Environment) and returns pass, fail or skip.

use std::future::Future;
use std::pin::Pin;

use crate::cloud::Capability;
use crate::env::Environment;
pub use crate::error::CaseError;
use crate::provider::Provider;

/// Tags shown in the case name, as upstream e2e tags read on TestGrid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Meaningful against a real cluster and cloud too.
    Conformance,
    /// Needs cloud control or fault injection: only against our mocks. It declares the
    /// [`Capability::Faults`] and [`Capability::Journal`] a mock offers.
    Mock,
    /// Takes more than a few seconds on purpose.
    Slow,
}

impl Tag {
    pub fn label(self) -> &'static str {
        match self {
            Tag::Conformance => "[Conformance]",
            Tag::Mock => "[Mock]",
            Tag::Slow => "[Slow]",
        }
    }
}

pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = Result<CaseMetrics, CaseError>> + Send + 'a>>;
/// A case body. It borrows the environment the runner built for it.
pub type CaseFn = for<'a> fn(&'a mut Environment) -> CaseFuture<'a>;

/// Numeric results a case reports (JUnit properties, graphed by TestGrid).
pub type CaseMetrics = Vec<(String, String)>;

/// One conformance case, instantiated once per provider.
#[derive(Clone)]
pub struct Case {
    /// Stable identifier from `shared/reference/ccm-behaviour.md` §4, e.g. `NI-01`.
    pub id: &'static str,
    /// Suite, e.g. `NodeInit`.
    pub suite: &'static str,
    /// What it checks, in the e2e style ("removes the uninitialized taint").
    pub title: &'static str,
    pub tags: &'static [Tag],
    /// Extra CCM flags this case needs (e.g. a short address-sync period).
    pub ccm_args: &'static [&'static str],
    /// Start the CCM before the body runs (most cases); false when the body does it.
    pub start_ccm: bool,
    /// The cloud control this case needs besides instances (every case creates them) and
    /// what its [`Tag::Mock`] declares: its suite's load balancers or routes. See
    /// [`Case::capabilities`].
    pub needs: &'static [Capability],
    pub run: CaseFn,
}

impl Case {
    /// `[sig-cloud-provider] [openstack] NodeInit removes ... (NI-01) [Conformance]`
    pub fn full_name(&self, provider: Provider) -> String {
        let tags: Vec<&str> = self.tags.iter().map(|t| t.label()).collect();
        format!(
            "[sig-cloud-provider] [{}] {} {} ({}) {}",
            provider.name(),
            self.suite,
            self.title,
            self.id,
            tags.join(" ")
        )
        .trim_end()
        .to_string()
    }

    pub fn is_mock_only(&self) -> bool {
        self.tags.contains(&Tag::Mock)
    }

    /// Every capability the case needs of the cloud backend: instances, [`Self::needs`],
    /// and faults and the journal where it is tagged [`Tag::Mock`]. The runner skips the
    /// case, with the reason, where the backend lacks one.
    pub fn capabilities(&self) -> Vec<Capability> {
        let mut all = vec![Capability::Instances];
        all.extend_from_slice(self.needs);
        if self.is_mock_only() {
            all.extend([Capability::Faults, Capability::Journal]);
        }
        all.sort();
        all.dedup();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(tags: &'static [Tag], needs: &'static [Capability]) -> Case {
        Case {
            id: "XX-01",
            suite: "Test",
            title: "t",
            tags,
            ccm_args: &[],
            start_ccm: false,
            needs,
            run: |_| Box::pin(async { Ok(Vec::new()) }),
        }
    }

    #[test]
    fn capabilities_are_instances_the_needs_and_what_mock_declares() {
        assert_eq!(
            case(&[Tag::Conformance], &[]).capabilities(),
            [Capability::Instances]
        );
        assert_eq!(
            case(&[Tag::Conformance], &[Capability::LoadBalancers]).capabilities(),
            [Capability::Instances, Capability::LoadBalancers]
        );
        assert_eq!(
            case(&[Tag::Mock], &[Capability::Routes, Capability::Instances]).capabilities(),
            [
                Capability::Instances,
                Capability::Routes,
                Capability::Faults,
                Capability::Journal
            ]
        );
    }
}

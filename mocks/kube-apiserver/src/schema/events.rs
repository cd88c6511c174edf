//! The schemas of the two Event kinds: core/v1 `Event` and events.k8s.io/v1 `Event`, and
//! the types they nest.
//!
//! Why this exists: both kinds describe the same events and share a kind name; they are
//! kept together, core/v1 first, because a lookup by kind name alone takes the first.

use super::def::{META, TypeDef, kind, ty};

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
pub(super) static EVENTS: &[TypeDef] = &[
    kind(
        "core.v1.Event",
        ("", "v1", "Event"),
        "A report of something that happened in the cluster.",
        &[
            ("action", "string", "What was done, or failed."),
            ("count", "integer", "How often the event occurred."),
            (
                "eventTime",
                "time",
                "When the event was first observed (microseconds).",
            ),
            (
                "firstTimestamp",
                "time",
                "When the event was first recorded.",
            ),
            (
                "involvedObject",
                "core.v1.ObjectReference",
                "The object the event is about.",
            ),
            ("lastTimestamp", "time", "When the event was last recorded."),
            ("message", "string", "Human-readable description."),
            META,
            ("reason", "string", "Machine-readable reason."),
            ("related", "core.v1.ObjectReference", "A secondary object."),
            (
                "reportingComponent",
                "string",
                "Controller that emitted the event.",
            ),
            (
                "reportingInstance",
                "string",
                "Instance of that controller.",
            ),
            (
                "series",
                "core.v1.EventSeries",
                "Data about a series of similar events.",
            ),
            (
                "source",
                "core.v1.EventSource",
                "Component that reported the event.",
            ),
            ("type", "string", "Normal or Warning."),
        ],
    ),
    ty(
        "core.v1.ObjectReference",
        "A reference to an object.",
        &[
            ("apiVersion", "string", "API version of the referent."),
            ("fieldPath", "string", "Field inside the referent."),
            ("kind", "string", "Kind of the referent."),
            ("name", "string", "Name of the referent."),
            ("namespace", "string", "Namespace of the referent."),
            (
                "resourceVersion",
                "string",
                "Resource version of the referent.",
            ),
            ("uid", "string", "UID of the referent."),
        ],
    ),
    ty(
        "core.v1.EventSeries",
        "A series of similar events.",
        &[
            ("count", "integer", "Occurrences in the series so far."),
            (
                "lastObservedTime",
                "time",
                "When the last occurrence was seen.",
            ),
        ],
    ),
    ty(
        "core.v1.EventSource",
        "Who reported an event.",
        &[
            ("component", "string", "Reporting component."),
            ("host", "string", "Node name."),
        ],
    ),
    kind(
        "events.v1.Event",
        ("events.k8s.io", "v1", "Event"),
        "A report of something that happened in the cluster.",
        &[
            ("action", "string", "What was done, or failed."),
            (
                "deprecatedCount",
                "integer",
                "Count, for core/v1 Event compatibility.",
            ),
            (
                "deprecatedFirstTimestamp",
                "time",
                "First timestamp, for core/v1 Event compatibility.",
            ),
            (
                "deprecatedLastTimestamp",
                "time",
                "Last timestamp, for core/v1 Event compatibility.",
            ),
            (
                "deprecatedSource",
                "core.v1.EventSource",
                "Source, for core/v1 Event compatibility.",
            ),
            (
                "eventTime",
                "time",
                "When the event was first observed (microseconds).",
            ),
            META,
            ("note", "string", "Human-readable description."),
            ("reason", "string", "Machine-readable reason."),
            (
                "regarding",
                "core.v1.ObjectReference",
                "The object the event is about.",
            ),
            ("related", "core.v1.ObjectReference", "A secondary object."),
            (
                "reportingController",
                "string",
                "Controller that emitted the event.",
            ),
            (
                "reportingInstance",
                "string",
                "Instance of that controller.",
            ),
            (
                "series",
                "events.v1.EventSeries",
                "Data about a series of similar events.",
            ),
            ("type", "string", "Normal or Warning."),
        ],
    ),
    ty(
        "events.v1.EventSeries",
        "A series of similar events.",
        &[
            ("count", "integer", "Occurrences in the series so far."),
            (
                "lastObservedTime",
                "time",
                "When the last occurrence was seen.",
            ),
        ],
    ),
];

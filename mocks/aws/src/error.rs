//! AWS errors as each service renders them: EC2 wraps them in
//! `<Response><Errors><Error>` with a `RequestID`, the ELB query APIs in
//! `<ErrorResponse><Error><Type>` with a `RequestId` (cloud-apis.md §4.1). Handlers return
//! an [`AwsError`]; the dispatcher renders it for the service the request went to.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::xml::{Xml, escape};

/// Which protocol dialect a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Ec2,
    /// ELB classic, `Version=2012-06-01`.
    Elb,
    /// ELBv2, `Version=2015-12-01`.
    Elbv2,
}

impl Service {
    /// The journal / fault-rule service name.
    pub fn name(self) -> &'static str {
        match self {
            Service::Ec2 => "ec2",
            Service::Elb => "elb",
            Service::Elbv2 => "elbv2",
        }
    }

    /// The XML namespace of responses.
    pub fn namespace(self) -> &'static str {
        match self {
            Service::Ec2 => "http://ec2.amazonaws.com/doc/2016-11-15/",
            Service::Elb => "http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/",
            Service::Elbv2 => "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/",
        }
    }
}

/// An error in AWS terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct AwsError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
}

impl AwsError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// A 400 with `code`.
    pub fn bad(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn missing(param: &str) -> Self {
        Self::bad(
            "MissingParameter",
            format!("The request must contain the parameter {param}"),
        )
    }

    pub fn invalid_value(param: &str, value: &str) -> Self {
        Self::bad(
            "InvalidParameterValue",
            format!("Value ({value}) for parameter {param} is invalid."),
        )
    }

    /// Renders for `service` with `request_id`.
    pub fn render(&self, service: Service, request_id: &str) -> Response {
        let body = match service {
            Service::Ec2 => {
                let mut x = Xml::new();
                x.elem("Errors", |x| {
                    x.elem("Error", |x| {
                        x.text("Code", &self.code).text("Message", &self.message);
                    });
                })
                .text("RequestID", request_id);
                format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response>{}</Response>",
                    x.finish()
                )
            }
            Service::Elb | Service::Elbv2 => {
                // Server-side failures are `Receiver`, the rest `Sender`.
                let kind = if self.status.is_server_error() {
                    "Receiver"
                } else {
                    "Sender"
                };
                format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse xmlns=\"{}\"><Error><Type>{kind}</Type><Code>{}</Code><Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
                    service.namespace(),
                    escape(&self.code),
                    escape(&self.message),
                    escape(request_id)
                )
            }
        };
        (
            self.status,
            [("content-type", "text/xml;charset=UTF-8")],
            body,
        )
            .into_response()
    }
}

/// The code an injected fault answers with, by status, in the service's dialect
/// (throttling presets of cloud-apis.md §7: EC2 `RequestLimitExceeded`/503, ELB `Throttling`).
pub fn fault_error(service: Service, status: u16, message: Option<&str>) -> AwsError {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let code = match (service, status.as_u16()) {
        (Service::Ec2, 503) => "RequestLimitExceeded",
        (_, 429) | (Service::Elb | Service::Elbv2, 400) => "Throttling",
        (Service::Ec2, 401) => "AuthFailure",
        (_, 403) => "AccessDenied",
        (Service::Ec2, 500) => "InternalError",
        (_, 500) => "InternalFailure",
        (_, 503) => "ServiceUnavailable",
        (_, s) if s >= 500 => "InternalFailure",
        _ => "InvalidParameterValue",
    };
    AwsError::new(
        status,
        code,
        message.unwrap_or("injected fault").to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_codes_follow_the_throttling_presets() {
        assert_eq!(
            fault_error(Service::Ec2, 503, None).code,
            "RequestLimitExceeded"
        );
        assert_eq!(fault_error(Service::Elb, 400, None).code, "Throttling");
        assert_eq!(
            fault_error(Service::Elbv2, 429, Some("x")).code,
            "Throttling"
        );
        assert_eq!(fault_error(Service::Ec2, 500, None).code, "InternalError");
    }
}

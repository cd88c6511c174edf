module ccm-conformance.invalid/judges/judgekit

go 1.26

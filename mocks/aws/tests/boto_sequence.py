"""One boto3 call sequence, run against our mock and/or moto's server, printed as JSON.

Each step's result is normalised (ids, request ids, times and addresses dropped or turned
into counts and booleans) so the two servers' answers can be compared by the Rust test
`tests/aws/boto.rs`. Usage:

    boto_sequence.py mock ENDPOINT REGION ACCESS_KEY SECRET CLUSTER_ID
    boto_sequence.py moto REGION CLUSTER_ID     # starts moto's ThreadedMotoServer(port=0)
"""

import json
import sys

import boto3
from botocore.exceptions import ClientError


def code_of(call):
    try:
        call()
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def sequence(session_kwargs, cluster_id):
    ec2 = boto3.client("ec2", **session_kwargs)
    elb = boto3.client("elb", **session_kwargs)
    out = {}
    cluster_tag = "kubernetes.io/cluster/" + cluster_id

    run = ec2.run_instances(
        ImageId="ami-12345678",
        MinCount=6,
        MaxCount=6,
        InstanceType="m5.large",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": cluster_tag, "Value": "owned"}]}
        ],
    )
    ids = [i["InstanceId"] for i in run["Instances"]]
    out["run.count"] = len(ids)
    out["run.states"] = sorted({i["State"]["Name"] for i in run["Instances"]})

    desc = ec2.describe_instances(InstanceIds=ids[:2])
    insts = [i for r in desc["Reservations"] for i in r["Instances"]]
    out["by_id.count"] = len(insts)
    out["by_id.states"] = sorted({i["State"]["Name"] for i in insts})
    out["by_id.types"] = sorted({i["InstanceType"] for i in insts})
    out["by_id.has_cluster_tag"] = all(
        any(t["Key"] == cluster_tag for t in i.get("Tags", [])) for i in insts
    )
    out["by_id.dns_suffix"] = sorted({i["PrivateDnsName"].split(".", 1)[1] for i in insts})
    out["by_id.eni_status"] = sorted(
        {n["Status"] for i in insts for n in i.get("NetworkInterfaces", [])}
    )

    first_dns = insts[0]["PrivateDnsName"]
    exact = ec2.describe_instances(
        Filters=[
            {"Name": "private-dns-name", "Values": [first_dns]},
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopped"]},
        ]
    )
    out["filter.private_dns.count"] = sum(len(r["Instances"]) for r in exact["Reservations"])
    wild = ec2.describe_instances(Filters=[{"Name": "private-dns-name", "Values": ["ip-*"]}])
    out["filter.wildcard.count"] = sum(len(r["Instances"]) for r in wild["Reservations"])
    tagged = ec2.describe_instances(
        Filters=[{"Name": "tag:" + cluster_tag, "Values": ["owned"]}]
    )
    out["filter.tag.count"] = sum(len(r["Instances"]) for r in tagged["Reservations"])

    pages = list(
        ec2.get_paginator("describe_instances").paginate(PaginationConfig={"PageSize": 5})
    )
    out["paginate.pages"] = len(pages)
    out["paginate.total"] = sum(len(r["Instances"]) for p in pages for r in p["Reservations"])

    zones = ec2.describe_availability_zones()["AvailabilityZones"]
    out["zones.all_have_zone_id"] = bool(zones) and all(z.get("ZoneId") for z in zones)
    out["zones.in_region"] = all(
        z["ZoneName"].startswith(session_kwargs["region_name"]) for z in zones
    )

    vpc_id = insts[0]["VpcId"]
    sg = ec2.create_security_group(GroupName="k8s-elb-a1", Description="lb", VpcId=vpc_id)
    ec2.authorize_security_group_ingress(
        GroupId=sg["GroupId"],
        IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
        ],
    )
    got = ec2.describe_security_groups(GroupIds=[sg["GroupId"]])["SecurityGroups"][0]
    out["sg.ingress"] = [
        [p["IpProtocol"], p.get("FromPort"), p.get("ToPort"), [r["CidrIp"] for r in p["IpRanges"]]]
        for p in got["IpPermissions"]
    ]
    out["sg.duplicate"] = code_of(
        lambda: ec2.create_security_group(GroupName="k8s-elb-a1", Description="lb", VpcId=vpc_id)
    )

    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    rtb = tables["RouteTables"][0]["RouteTableId"]
    ec2.create_route(RouteTableId=rtb, DestinationCidrBlock="10.244.1.0/24", InstanceId=ids[0])
    routes = ec2.describe_route_tables(RouteTableIds=[rtb])["RouteTables"][0]["Routes"]
    out["route.created"] = [
        r.get("InstanceId") == ids[0] for r in routes if r["DestinationCidrBlock"] == "10.244.1.0/24"
    ]
    ec2.delete_route(RouteTableId=rtb, DestinationCidrBlock="10.244.1.0/24")
    routes = ec2.describe_route_tables(RouteTableIds=[rtb])["RouteTables"][0]["Routes"]
    out["route.deleted"] = not any(r["DestinationCidrBlock"] == "10.244.1.0/24" for r in routes)

    subnet = insts[0]["SubnetId"]
    dns = elb.create_load_balancer(
        LoadBalancerName="a1b2c3",
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 30080}],
        Subnets=[subnet],
        Tags=[{"Key": cluster_tag, "Value": "owned"}],
    )["DNSName"]
    out["elb.dns_suffix"] = dns.endswith(".elb.amazonaws.com")
    reg = elb.register_instances_with_load_balancer(
        LoadBalancerName="a1b2c3", Instances=[{"InstanceId": i} for i in ids[:2]]
    )
    out["elb.registered"] = len(reg["Instances"])
    hc = elb.configure_health_check(
        LoadBalancerName="a1b2c3",
        HealthCheck={
            "Target": "HTTP:10256/healthz",
            "Interval": 10,
            "Timeout": 5,
            "UnhealthyThreshold": 6,
            "HealthyThreshold": 2,
        },
    )["HealthCheck"]
    out["elb.health_check"] = hc["Target"]
    d = elb.describe_load_balancers(LoadBalancerNames=["a1b2c3"])["LoadBalancerDescriptions"][0]
    out["elb.describe"] = {
        "listeners": [
            [l["Listener"]["Protocol"], l["Listener"]["LoadBalancerPort"], l["Listener"]["InstancePort"]]
            for l in d["ListenerDescriptions"]
        ],
        "instances": len(d["Instances"]),
        "scheme": d["Scheme"],
        "subnets": d["Subnets"] == [subnet],
        "dns": d["DNSName"] == dns,
    }
    tags = elb.describe_tags(LoadBalancerNames=["a1b2c3"])["TagDescriptions"][0]["Tags"]
    out["elb.tags"] = sorted(t["Key"] for t in tags)
    elb.delete_load_balancer(LoadBalancerName="a1b2c3")
    out["elb.after_delete"] = code_of(
        lambda: elb.describe_load_balancers(LoadBalancerNames=["a1b2c3"])
    )

    elbv2 = boto3.client("elbv2", **session_kwargs)
    created = elbv2.create_load_balancer(
        Name="k8s-nlb", Type="network", Scheme="internet-facing", Subnets=[subnet]
    )["LoadBalancers"][0]
    lb_arn = created["LoadBalancerArn"]
    out["nlb.created_state"] = created["State"]["Code"]
    out["nlb.arn_kind"] = ":loadbalancer/net/k8s-nlb/" in lb_arn
    elbv2.get_waiter("load_balancer_available").wait(
        LoadBalancerArns=[lb_arn], WaiterConfig={"Delay": 1, "MaxAttempts": 10}
    )
    out["nlb.after_wait"] = elbv2.describe_load_balancers(LoadBalancerArns=[lb_arn])[
        "LoadBalancers"
    ][0]["State"]["Code"]
    tg_arn = elbv2.create_target_group(
        Name="k8s-default-web-0123456789",
        Protocol="TCP",
        Port=30080,
        VpcId=vpc_id,
        TargetType="instance",
    )["TargetGroups"][0]["TargetGroupArn"]
    elbv2.register_targets(TargetGroupArn=tg_arn, Targets=[{"Id": i} for i in ids[:2]])
    listener = elbv2.create_listener(
        LoadBalancerArn=lb_arn,
        Protocol="TCP",
        Port=80,
        DefaultActions=[{"Type": "forward", "TargetGroupArn": tg_arn}],
    )["Listeners"][0]
    out["nlb.listener"] = [listener["Protocol"], listener["Port"]]
    health = elbv2.describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"]
    out["nlb.target_health"] = sorted(h["TargetHealth"]["State"] for h in health)
    out["nlb.tg_by_lb"] = [
        t["TargetGroupArn"] == tg_arn
        for t in elbv2.describe_target_groups(LoadBalancerArn=lb_arn)["TargetGroups"]
    ]
    out["nlb.delete_tg_in_use"] = code_of(lambda: elbv2.delete_target_group(TargetGroupArn=tg_arn))
    elbv2.delete_listener(ListenerArn=listener["ListenerArn"])
    elbv2.delete_target_group(TargetGroupArn=tg_arn)
    elbv2.delete_load_balancer(LoadBalancerArn=lb_arn)
    out["nlb.after_delete"] = code_of(
        lambda: elbv2.describe_load_balancers(LoadBalancerArns=[lb_arn])
    )
    out["nlb.tg_not_found"] = code_of(
        lambda: elbv2.describe_target_groups(TargetGroupArns=[tg_arn])
    )

    stop = ec2.stop_instances(InstanceIds=[ids[0]])["StoppingInstances"][0]
    out["stop.current"] = stop["CurrentState"]["Name"]
    out["stop.previous"] = stop["PreviousState"]["Name"]
    term = ec2.terminate_instances(InstanceIds=ids)["TerminatingInstances"]
    out["terminate.current"] = sorted({t["CurrentState"]["Name"] for t in term})
    after = ec2.describe_instances(InstanceIds=[ids[1]])
    out["terminate.described"] = after["Reservations"][0]["Instances"][0]["State"]["Name"]

    out["error.unknown_id"] = code_of(
        lambda: ec2.describe_instances(InstanceIds=["i-0123456789abcdef0"])
    )
    out["error.ids_and_max"] = code_of(
        lambda: ec2.describe_instances(InstanceIds=[ids[0]], MaxResults=5)
    )
    return out


def main():
    mode = sys.argv[1]
    if mode == "mock":
        endpoint, region, key, secret, cluster = sys.argv[2:7]
        kwargs = dict(
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
        )
        print(json.dumps(sequence(kwargs, cluster), sort_keys=True))
    elif mode == "moto":
        region, cluster = sys.argv[2:4]
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
        server.start()
        host, port = server.get_host_and_port()
        try:
            kwargs = dict(
                endpoint_url=f"http://{host}:{port}",
                region_name=region,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
            print(json.dumps(sequence(kwargs, cluster), sort_keys=True))
        finally:
            server.stop()
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()

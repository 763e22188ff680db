"""A second, independent gRPC client (Python's grpcio) against the demo's feed service.

Sends six `chirp.v1.Feed/Get` calls for one account to the address given, and prints what the
sixth was answered, as JSON: the status code, the RetryInfo delay (seconds) and the QuotaFailure
subject, read from `grpc-status-details-bin` with grpcio-status. Messages are written by hand
(field 1, a string): no generated code, no protoc.
"""

import json
import sys

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


def feed_request(account: str) -> bytes:
    text = account.encode()
    return b"\x0a" + bytes([len(text)]) + text


def main() -> None:
    address, account = sys.argv[1], sys.argv[2]
    with grpc.insecure_channel(address) as channel:
        get = channel.unary_unary(
            "/chirp.v1.Feed/Get",
            request_serializer=lambda message: message,
            response_deserializer=lambda message: message,
        )
        metadata = [("x-account", account)]
        for _ in range(5):
            get(feed_request(account), metadata=metadata)
        try:
            get(feed_request(account), metadata=metadata)
            print(json.dumps({"code": "OK"}))
            return
        except grpc.RpcError as error:
            status = rpc_status.from_call(error)
            found = {"code": error.code().name, "status_code": status.code if status else None}
            for detail in status.details if status else []:
                if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                    info = error_details_pb2.RetryInfo()
                    detail.Unpack(info)
                    delay = info.retry_delay
                    found["retry_delay"] = delay.seconds + delay.nanos / 1e9
                if detail.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
                    failure = error_details_pb2.QuotaFailure()
                    detail.Unpack(failure)
                    found["subject"] = failure.violations[0].subject
            print(json.dumps(found))


if __name__ == "__main__":
    main()

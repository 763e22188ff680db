//! The script's integer helpers, run by a real Redis: `muldiv` computes floor(a × b / c) and
//! the remainder exactly where a × b passes 2^53 and a double would round, and `idiv` corrects
//! the rounding of a / b. Compared against u128 arithmetic.

mod common;

const PRELUDE: &str = include_str!("../src/lua/prelude.lua");

fn run(body: &str, args: &[u64]) -> Vec<i64> {
    let script = redis::Script::new(&format!("{PRELUDE}\n{body}"));
    let mut invocation = script.prepare_invoke();
    // The prelude reads ARGV[2] ("now") and ARGV[3] (slack).
    invocation.arg("test").arg(0).arg(0);
    for arg in args {
        invocation.arg(*arg);
    }
    let url = common::server().url();
    common::block_on(async move {
        let client = redis::Client::open(url).expect("url");
        let mut connection = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        invocation
            .invoke_async(&mut connection)
            .await
            .expect("script runs")
    })
}

#[test]
fn muldiv_is_exact_beyond_two_to_the_53() {
    let year_micros: u64 = 366 * 86_400 * 1_000_000;
    let big_limit: u64 = 1 << 40;
    let cases = [
        (big_limit - 1, year_micros - 1, year_micros),
        (big_limit, year_micros, year_micros),
        (big_limit - 3, year_micros / 2 + 1, year_micros),
        ((1 << 52) - 1, (1 << 45) - 7, (1 << 45) - 6),
        (999_999_999_989, 31_536_000_000_007, 31_622_400_000_000),
        (big_limit - 1, year_micros, big_limit - 1),
        (3, year_micros, 7),
        (12_345, 67_890, 11),
        (0, year_micros, 3),
    ];
    for (a, b, c) in cases {
        let product = u128::from(a) * u128::from(b);
        let quotient = product / u128::from(c);
        if quotient >= 1 << 53 {
            continue;
        }
        let expected = [quotient as i64, (product % u128::from(c)) as i64];
        let answer = run(
            "return {muldiv(tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]))}",
            &[a, b, c],
        );
        assert_eq!(answer, expected, "muldiv({a}, {b}, {c})");
    }
}

#[test]
fn idiv_floors_exactly_next_to_multiples() {
    let divisor: u64 = 31_622_400_000_000;
    for quotient in [1u64, 7, 284, 1 << 7] {
        for offset in [-1i64, 0, 1] {
            let dividend = (divisor * quotient)
                .checked_add_signed(offset)
                .expect("positive");
            let expected = (dividend / divisor) as i64;
            let answer = run(
                "return {idiv(tonumber(ARGV[4]), tonumber(ARGV[5]))}",
                &[dividend, divisor],
            );
            assert_eq!(answer, [expected], "idiv({dividend}, {divisor})");
        }
    }
}

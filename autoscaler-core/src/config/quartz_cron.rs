//! The Quartz cron expressions of `job.autoscaler.excluded.periods` (a port of Quartz 2.3's
//! `CronExpression`: parsing with its rules and quirks, and `isSatisfiedBy`).

use super::syntax::{java_trim, parse_int};
use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};
use std::collections::BTreeSet;

/// Marker Quartz stores for `*` next to the expanded values.
const ALL_SPEC: i32 = 99;
/// Marker Quartz stores for `?`.
const NO_SPEC: i32 = 98;
/// Quartz gives up looking for a fire time after this year, so later instants never match.
const LAST_YEAR: i32 = 2999;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

const FIELDS: [Field; 7] = [
    Field::Second,
    Field::Minute,
    Field::Hour,
    Field::DayOfMonth,
    Field::Month,
    Field::DayOfWeek,
    Field::Year,
];

impl Field {
    /// The smallest and largest value `*` or an open range expands to.
    fn span(self) -> (i32, i32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (1, 7),
            Field::Year => (1970, LAST_YEAR),
        }
    }
}

/// A parsed Quartz cron expression: the value set of every field plus the special day flags.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct QuartzCron {
    sets: [BTreeSet<i32>; 7],
    last_day_of_week: bool,
    nth_day_of_week: i32,
    last_day_of_month: bool,
    nearest_weekday: bool,
    last_day_offset: i32,
}

type CronResult<T> = Result<T, String>;

/// A char at `i`, or the error Java's `charAt` would raise.
fn char_at(s: &[char], i: usize) -> CronResult<char> {
    s.get(i)
        .copied()
        .ok_or_else(|| format!("Illegal cron expression format (index {i} out of range)"))
}

fn digit_at(s: &[char], i: usize) -> CronResult<i32> {
    let c = char_at(s, i)?;
    c.to_digit(10)
        .map(|d| d as i32)
        .ok_or_else(|| format!("Illegal cron expression format (not a number: {c})"))
}

fn month_number(name: &str) -> Option<i32> {
    const MONTHS: [&str; 12] = [
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ];
    MONTHS.iter().position(|m| *m == name).map(|p| p as i32 + 1)
}

fn day_of_week_number(name: &str) -> Option<i32> {
    const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    DAYS.iter().position(|d| *d == name).map(|p| p as i32 + 1)
}

/// Whether `s` is `L-<digits>[W]` (the relative last-day form that must not be read as a name).
fn is_last_day_offset(s: &[char]) -> bool {
    let Some(rest) = s.strip_prefix(&['L', '-']) else {
        return false;
    };
    let rest = rest.strip_suffix(&['W']).unwrap_or(rest);
    rest.iter().all(char::is_ascii_digit)
}

impl QuartzCron {
    /// Parses `expression` with Quartz's rules and quirks (upper-cased first; fields separated by
    /// spaces or tabs; a missing year means every year; tokens after the year are ignored; exactly
    /// one of day-of-month and day-of-week must be `?`).
    pub(super) fn parse(expression: &str) -> CronResult<Self> {
        let upper = expression.to_uppercase();
        let mut cron = QuartzCron::default();
        let mut field_index = 0;
        for token in upper.split([' ', '\t']).filter(|t| !t.is_empty()) {
            let Some(&field) = FIELDS.get(field_index) else { break };
            let token = java_trim(token);
            let has_l = token.contains('L') && token.chars().count() > 1 && token.contains(',');
            if field == Field::DayOfMonth && has_l {
                return Err(
                    "Support for specifying 'L' and 'LW' with other days of the month is not implemented".into(),
                );
            }
            if field == Field::DayOfWeek && has_l {
                return Err("Support for specifying 'L' with other days of the week is not implemented".into());
            }
            if field == Field::DayOfWeek && token.matches('#').count() > 1 {
                return Err("Support for specifying multiple \"nth\" days is not implemented.".into());
            }
            for value in token.split(',').filter(|v| !v.is_empty()) {
                let chars: Vec<char> = value.chars().collect();
                cron.store(&chars, field)?;
            }
            field_index += 1;
        }
        if field_index <= 5 {
            return Err("Unexpected end of expression.".into());
        }
        if field_index <= 6 {
            cron.store(&['*'], Field::Year)?;
        }
        let day_of_month_set = !cron.set(Field::DayOfMonth).contains(&NO_SPEC);
        let day_of_week_set = !cron.set(Field::DayOfWeek).contains(&NO_SPEC);
        if day_of_month_set == day_of_week_set {
            return Err(
                "Support for specifying both a day-of-week AND a day-of-month parameter is not implemented.".into(),
            );
        }
        Ok(cron)
    }

    fn set(&self, field: Field) -> &BTreeSet<i32> {
        &self.sets[field as usize]
    }

    fn set_mut(&mut self, field: Field) -> &mut BTreeSet<i32> {
        &mut self.sets[field as usize]
    }

    /// One comma-separated item of a field (Quartz `storeExpressionVals`). Like Quartz, anything
    /// after a complete item is ignored.
    fn store(&mut self, s: &[char], field: Field) -> CronResult<()> {
        let Some(&c) = s.first() else { return Ok(()) };
        let len = s.len();
        if c.is_ascii_uppercase() && s != ['L'] && s != ['L', 'W'] && !is_last_day_offset(s) {
            return self.store_name(s, field);
        }
        match c {
            '?' => {
                if len > 2 && s[1] != ' ' && s[2] != '\t' {
                    return Err(format!("Illegal character after '?': {}", s[1]));
                }
                if field != Field::DayOfWeek && field != Field::DayOfMonth {
                    return Err("'?' can only be specified for Day-of-Month or Day-of-Week.".into());
                }
                if field == Field::DayOfWeek && !self.last_day_of_month {
                    let last = self.set(Field::DayOfMonth).last().copied();
                    match last {
                        None => return Err("Illegal cron expression format (no day-of-month)".into()),
                        Some(NO_SPEC) => {
                            return Err("'?' can only be specified for Day-of-Month -OR- Day-of-Week.".into());
                        }
                        Some(_) => {}
                    }
                }
                self.add_to_set(NO_SPEC, -1, 0, field)
            }
            '*' | '/' => {
                if c == '*' && len == 1 {
                    return self.add_to_set(ALL_SPEC, -1, 0, field);
                }
                if c == '/' && (len == 1 || s[1] == ' ' || s[1] == '\t') {
                    return Err("'/' must be followed by an integer.".into());
                }
                let i = if c == '*' { 1 } else { 0 };
                let increment = if char_at(s, i)? == '/' {
                    if i + 1 >= len {
                        return Err("Unexpected end of string.".into());
                    }
                    // Quartz reads the whole rest of the item as the increment.
                    let rest: String = s[i + 1..].iter().collect();
                    let increment = parse_int(&rest)
                        .map_err(|_| format!("Illegal cron expression format (bad increment {rest})"))?;
                    check_increment_range(increment, field)?;
                    increment
                } else {
                    1
                };
                self.add_to_set(ALL_SPEC, -1, increment, field)
            }
            'L' => {
                if field == Field::DayOfMonth {
                    self.last_day_of_month = true;
                }
                if field == Field::DayOfWeek {
                    // A bare `L` in day-of-week means Saturday (7), not "last".
                    self.add_to_set(7, 7, 0, field)?;
                }
                let mut i = 1;
                if field == Field::DayOfMonth && len > i {
                    if s[i] == '-' {
                        let (offset, pos) = get_value(0, s, i + 1)?;
                        if offset > 30 {
                            return Err("Offset from last day must be <= 30".into());
                        }
                        self.last_day_offset = offset;
                        i = pos;
                    }
                    if len > i && s[i] == 'W' {
                        self.nearest_weekday = true;
                    }
                }
                Ok(())
            }
            '0'..='9' => {
                let mut value = digit_at(s, 0)?;
                if len == 1 {
                    return self.add_to_set(value, -1, -1, field);
                }
                let mut i = 1;
                if s[1].is_ascii_digit() {
                    (value, i) = get_value(value, s, 1)?;
                }
                self.check_next(i, s, value, field)
            }
            other => Err(format!("Unexpected character: {other}")),
        }
    }

    /// A month or day-of-week name item (`JAN`, `MON-FRI`, `FRI#2`, `FRIL`).
    fn store_name(&mut self, s: &[char], field: Field) -> CronResult<()> {
        let name_at = |i: usize| -> CronResult<String> {
            s.get(i..i + 3)
                .map(|n| n.iter().collect())
                .ok_or_else(|| "Illegal cron expression format (name shorter than 3 letters)".to_owned())
        };
        let name = name_at(0)?;
        let (start, mut end) = match field {
            Field::Month => (
                month_number(&name).ok_or_else(|| format!("Invalid Month value: '{name}'"))?,
                -1,
            ),
            Field::DayOfWeek => (
                day_of_week_number(&name).ok_or_else(|| format!("Invalid Day-of-Week value: '{name}'"))?,
                -1,
            ),
            _ => return Err(format!("Illegal characters for this position: '{name}'")),
        };
        if let Some(&next) = s.get(3) {
            match (field, next) {
                (Field::Month, '-') => {
                    let name = name_at(4)?;
                    end = month_number(&name).ok_or_else(|| format!("Invalid Month value: '{name}'"))?;
                }
                (Field::DayOfWeek, '-') => {
                    let name = name_at(4)?;
                    end = day_of_week_number(&name).ok_or_else(|| format!("Invalid Day-of-Week value: '{name}'"))?;
                }
                (Field::DayOfWeek, '#') => {
                    let rest: String = s[4..].iter().collect();
                    self.nth_day_of_week = parse_int(&rest)
                        .ok()
                        .filter(|n| (1..=5).contains(n))
                        .ok_or_else(|| "A numeric value between 1 and 5 must follow the '#' option".to_owned())?;
                }
                (Field::DayOfWeek, 'L') => self.last_day_of_week = true,
                _ => {}
            }
        }
        let increment = if end != -1 { 1 } else { 0 };
        self.add_to_set(start, end, increment, field)
    }

    /// What follows a number: `L`, `W`, `#n`, `-end[/step]`, `/step` or nothing (Quartz `checkNext`).
    fn check_next(&mut self, pos: usize, s: &[char], value: i32, field: Field) -> CronResult<()> {
        let len = s.len();
        if pos >= len {
            return self.add_to_set(value, -1, -1, field);
        }
        match s[pos] {
            'L' => {
                if field != Field::DayOfWeek {
                    return Err(format!("'L' option is not valid here. (pos={pos})"));
                }
                if !(1..=7).contains(&value) {
                    return Err("Day-of-Week values must be between 1 and 7".into());
                }
                self.last_day_of_week = true;
                self.set_mut(field).insert(value);
                Ok(())
            }
            'W' => {
                if field != Field::DayOfMonth {
                    return Err(format!("'W' option is not valid here. (pos={pos})"));
                }
                self.nearest_weekday = true;
                if value > 31 {
                    return Err(
                        "The 'W' option does not make sense with values larger than 31 (max number of days \
                                in a month)"
                            .into(),
                    );
                }
                self.set_mut(field).insert(value);
                Ok(())
            }
            '#' => {
                if field != Field::DayOfWeek {
                    return Err(format!("'#' option is not valid here. (pos={pos})"));
                }
                let rest: String = s[pos + 1..].iter().collect();
                self.nth_day_of_week = parse_int(&rest)
                    .ok()
                    .filter(|n| (1..=5).contains(n))
                    .ok_or_else(|| "A numeric value between 1 and 5 must follow the '#' option".to_owned())?;
                self.set_mut(field).insert(value);
                Ok(())
            }
            '-' => {
                let mut i = pos + 1;
                let first_digit = digit_at(s, i)?;
                let mut end = first_digit;
                i += 1;
                if i >= len {
                    return self.add_to_set(value, end, 1, field);
                }
                if s[i].is_ascii_digit() {
                    (end, i) = get_value(first_digit, s, i)?;
                }
                if i < len && s[i] == '/' {
                    i += 1;
                    let step_digit = digit_at(s, i)?;
                    i += 1;
                    if i >= len {
                        return self.add_to_set(value, end, step_digit, field);
                    }
                    if s[i].is_ascii_digit() {
                        let (step, _) = get_value(step_digit, s, i)?;
                        return self.add_to_set(value, end, step, field);
                    }
                    return self.add_to_set(value, end, step_digit, field);
                }
                self.add_to_set(value, end, 1, field)
            }
            '/' => {
                if pos + 1 >= len || s[pos + 1] == ' ' || s[pos + 1] == '\t' {
                    return Err("'/' must be followed by an integer.".into());
                }
                let step_digit = digit_at(s, pos + 1)?;
                let i = pos + 2;
                if i >= len {
                    check_increment_range(step_digit, field)?;
                    return self.add_to_set(value, -1, step_digit, field);
                }
                if s[i].is_ascii_digit() {
                    let (step, _) = get_value(step_digit, s, i)?;
                    check_increment_range(step, field)?;
                    return self.add_to_set(value, -1, step, field);
                }
                Err(format!("Unexpected character '{}' after '/'", s[i]))
            }
            _ => self.add_to_set(value, -1, 0, field),
        }
    }

    /// Adds `value`, or the range `value..=end` stepping by `increment`, to the field's set, with
    /// Quartz's range checks and its wrap-around for reversed ranges (`22-2` hours, `FRI-MON`).
    /// `increment` 0 or -1 means a single value.
    fn add_to_set(&mut self, value: i32, end: i32, increment: i32, field: Field) -> CronResult<()> {
        let special = value == ALL_SPEC || value == NO_SPEC;
        match field {
            Field::Second | Field::Minute if (!(0..=59).contains(&value) || end > 59) && value != ALL_SPEC => {
                return Err("Minute and Second values must be between 0 and 59".into());
            }
            Field::Hour if (!(0..=23).contains(&value) || end > 23) && value != ALL_SPEC => {
                return Err("Hour values must be between 0 and 23".into());
            }
            Field::DayOfMonth if (!(1..=31).contains(&value) || end > 31) && !special => {
                return Err("Day of month values must be between 1 and 31".into());
            }
            Field::Month if (!(1..=12).contains(&value) || end > 12) && value != ALL_SPEC => {
                return Err("Month values must be between 1 and 12".into());
            }
            Field::DayOfWeek if (value == 0 || value > 7 || end > 7) && !special => {
                return Err("Day-of-Week values must be between 1 and 7".into());
            }
            _ => {}
        }
        if (increment == 0 || increment == -1) && value != ALL_SPEC {
            self.set_mut(field).insert(if value != -1 { value } else { NO_SPEC });
            return Ok(());
        }
        let mut increment = increment;
        if value == ALL_SPEC && increment <= 0 {
            increment = 1;
            self.set_mut(field).insert(ALL_SPEC);
        }
        // Every path reaching here has a positive step; the floor keeps the loop finite regardless.
        let increment = increment.max(1);
        let (lowest, highest) = field.span();
        let start = if value == -1 || value == ALL_SPEC {
            lowest
        } else {
            value
        };
        let mut stop = if end == -1 { highest } else { end };
        let mut wrap = None;
        if stop < start {
            let modulus = match field {
                Field::Second | Field::Minute => 60,
                Field::Hour => 24,
                Field::Month => 12,
                Field::DayOfWeek => 7,
                Field::DayOfMonth => 31,
                Field::Year => return Err("Illegal cron expression format (start year after stop year)".into()),
            };
            stop += modulus;
            wrap = Some(modulus);
        }
        // Quartz stores every value of the range, however long (`99-9946591`: 99 is `*`, whose
        // range check is skipped). No instant can match a value above a field's largest, and
        // only the special values up to `ALL_SPEC` are ever looked up, so the loop stops there:
        // at LAST_YEAR for years, and for the other fields after `ALL_SPEC` plus one value beyond
        // it, which keeps the set's largest value (what `?` checks) on the same side of `NO_SPEC`.
        let limit = match (field, wrap) {
            (Field::Year, _) => stop.min(LAST_YEAR),
            (_, None) => stop.min(ALL_SPEC),
            (_, Some(_)) => stop,
        };
        let one_based = matches!(field, Field::Month | Field::DayOfWeek | Field::DayOfMonth);
        let set = self.set_mut(field);
        let mut v = start;
        while v <= limit {
            let stored = match wrap {
                None => v,
                Some(m) if v % m == 0 && one_based => m,
                Some(m) => v % m,
            };
            set.insert(stored);
            match v.checked_add(increment) {
                Some(next) => v = next,
                None => return Ok(()),
            }
        }
        if field != Field::Year && v <= stop {
            set.insert(v);
        }
        Ok(())
    }

    /// Whether the whole second of `at` is a fire time (Quartz `isSatisfiedBy`, which asks whether
    /// the next fire time after one second earlier is exactly this second).
    pub(super) fn is_satisfied_by(&self, at: DateTime<Utc>) -> bool {
        let year = at.year();
        if year > LAST_YEAR {
            return false;
        }
        let fields_match = [
            (Field::Second, at.second() as i32),
            (Field::Minute, at.minute() as i32),
            (Field::Hour, at.hour() as i32),
            (Field::Month, at.month() as i32),
            (Field::Year, year),
        ]
        .iter()
        .all(|&(field, value)| self.set(field).contains(&value));
        fields_match && self.day_matches(at.date_naive())
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        let day = date.day() as i32;
        let last_day = last_day_of_month(date);
        let java_day_of_week = date.weekday().number_from_sunday() as i32;
        let day_of_month_set = !self.set(Field::DayOfMonth).contains(&NO_SPEC);
        let day_of_week_set = !self.set(Field::DayOfWeek).contains(&NO_SPEC);
        if day_of_month_set && !day_of_week_set {
            if self.last_day_of_month {
                let target = last_day - self.last_day_offset;
                if self.nearest_weekday {
                    day == nearest_weekday(date, target, last_day)
                } else {
                    day == target
                }
            } else if self.nearest_weekday {
                // Quartz applies `W` to the smallest listed day.
                match self.set(Field::DayOfMonth).first() {
                    Some(&first) => day == nearest_weekday(date, first, last_day),
                    None => false,
                }
            } else {
                self.set(Field::DayOfMonth).contains(&day)
            }
        } else if day_of_week_set && !day_of_month_set {
            let days = self.set(Field::DayOfWeek);
            if self.last_day_of_week {
                // The last such weekday of the month: no later one fits before the month ends.
                days.first() == Some(&java_day_of_week) && day + 7 > last_day
            } else if self.nth_day_of_week != 0 {
                let week_of_month = (day + 6) / 7;
                days.first() == Some(&java_day_of_week) && week_of_month == self.nth_day_of_week
            } else {
                days.contains(&java_day_of_week)
            }
        } else {
            false
        }
    }
}

/// The day Quartz's `W` picks for `target` in `date`'s month: Saturday moves to Friday (or to
/// Monday the 3rd when it is the 1st), Sunday to Monday (or to Friday when it is the last day).
/// `target` may lie outside the month (an `L-n` offset or `31W` in April); Quartz then takes the
/// weekday of the overflowing date, so this does too.
fn nearest_weekday(date: NaiveDate, target: i32, last_day: i32) -> i32 {
    let offset = chrono::Duration::days(i64::from(target) - 1);
    let Some(probe) = date.with_day(1).and_then(|first| first.checked_add_signed(offset)) else {
        return target;
    };
    match probe.weekday().number_from_sunday() {
        7 if target == 1 => target + 2,
        7 => target - 1,
        1 if target == last_day => target - 2,
        1 => target + 1,
        _ => target,
    }
}

fn last_day_of_month(date: NaiveDate) -> i32 {
    let (y, m) = (date.year(), date.month());
    let next = if m == 12 {
        NaiveDate::from_ymd_opt(y + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(y, m + 1, 1)
    };
    next.and_then(|n| n.pred_opt()).map_or(31, |d| d.day() as i32)
}

/// Quartz `getValue`: `prefix` followed by the digits from `i`; returns the value and the position
/// after it (one past the end when the digits run to the end, as Quartz does).
fn get_value(prefix: i32, s: &[char], mut i: usize) -> CronResult<(i32, usize)> {
    let mut text = prefix.to_string();
    let mut c = char_at(s, i)?;
    while c.is_ascii_digit() {
        text.push(c);
        i += 1;
        match s.get(i) {
            Some(&next) => c = next,
            None => break,
        }
    }
    let pos = if i < s.len() { i } else { i + 1 };
    let value = text
        .parse()
        .map_err(|_| format!("Illegal cron expression format (number {text} too large)"))?;
    Ok((value, pos))
}

fn check_increment_range(increment: i32, field: Field) -> CronResult<()> {
    let limit = match field {
        Field::Second | Field::Minute => 59,
        Field::Hour => 23,
        Field::DayOfMonth => 31,
        Field::DayOfWeek => 7,
        Field::Month => 12,
        Field::Year => return Ok(()),
    };
    if increment > limit {
        Err(format!("Increment > {} : {increment}", limit + 1))
    } else {
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failing fixture should fail the test loudly
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    fn cron(e: &str) -> QuartzCron {
        QuartzCron::parse(e).unwrap_or_else(|err| panic!("{e:?} should parse: {err}"))
    }

    #[test]
    fn cron_fields_seconds_minutes_hours_and_names() {
        let c = cron("0 0 12 ? * MON-FRI");
        assert!(c.is_satisfied_by(at(2024, 5, 1, 12, 0, 0))); // Wednesday
        assert!(!c.is_satisfied_by(at(2024, 5, 1, 12, 0, 1)));
        assert!(!c.is_satisfied_by(at(2024, 5, 4, 12, 0, 0))); // Saturday
        let c = cron("0/15 30 9-17/4 * JAN,jul ?");
        assert!(c.is_satisfied_by(at(2024, 7, 3, 13, 30, 45)));
        assert!(!c.is_satisfied_by(at(2024, 7, 3, 11, 30, 45))); // hours 9, 13, 17 only
        assert!(!c.is_satisfied_by(at(2024, 7, 3, 13, 30, 44)));
        assert!(!c.is_satisfied_by(at(2024, 6, 3, 13, 30, 45)));
        // Sub-second precision is ignored.
        assert!(c.is_satisfied_by(at(2024, 7, 3, 13, 30, 45) + chrono::Duration::milliseconds(999)));
        // Hour range across midnight.
        let c = cron("* * 22-2 * * ?");
        assert!(c.is_satisfied_by(at(2024, 1, 1, 23, 0, 0)));
        assert!(c.is_satisfied_by(at(2024, 1, 1, 1, 59, 59)));
        assert!(!c.is_satisfied_by(at(2024, 1, 1, 3, 0, 0)));
        // Day-of-week range across the week end: FRI-MON = 6,7,1,2.
        let c = cron("* * * ? * FRI-MON");
        assert!(c.is_satisfied_by(at(2024, 5, 5, 0, 0, 0))); // Sunday
        assert!(!c.is_satisfied_by(at(2024, 5, 7, 0, 0, 0))); // Tuesday
    }

    #[test]
    fn day_of_week_is_one_based_from_sunday() {
        let sunday = cron("* * * ? * 1");
        assert!(sunday.is_satisfied_by(at(2024, 5, 5, 10, 0, 0)));
        assert!(!sunday.is_satisfied_by(at(2024, 5, 6, 10, 0, 0)));
        let saturday = cron("* * * ? * 7");
        assert!(saturday.is_satisfied_by(at(2024, 5, 4, 10, 0, 0)));
        // A bare L in day-of-week is Saturday.
        assert!(cron("* * * ? * L").is_satisfied_by(at(2024, 5, 4, 10, 0, 0)));
        assert!(!cron("* * * ? * L").is_satisfied_by(at(2024, 5, 31, 10, 0, 0)));
    }

    #[test]
    fn last_nearest_and_nth_days() {
        // Last day of the month, and three days before it.
        assert!(cron("* * * L * ?").is_satisfied_by(at(2024, 2, 29, 0, 0, 0)));
        assert!(!cron("* * * L * ?").is_satisfied_by(at(2024, 2, 28, 0, 0, 0)));
        assert!(cron("* * * L-3 * ?").is_satisfied_by(at(2024, 4, 27, 0, 0, 0)));
        // LW: the last weekday. 2024-03-31 is a Sunday, so Friday the 29th.
        assert!(cron("* * * LW * ?").is_satisfied_by(at(2024, 3, 29, 0, 0, 0)));
        assert!(!cron("* * * LW * ?").is_satisfied_by(at(2024, 3, 31, 0, 0, 0)));
        // 15W: 2024-06-15 is a Saturday, so Friday the 14th.
        assert!(cron("* * * 15W * ?").is_satisfied_by(at(2024, 6, 14, 0, 0, 0)));
        assert!(!cron("* * * 15W * ?").is_satisfied_by(at(2024, 6, 15, 0, 0, 0)));
        // 1W: 2024-06-01 is a Saturday, so Monday the 3rd (never the previous month).
        assert!(cron("* * * 1W * ?").is_satisfied_by(at(2024, 6, 3, 0, 0, 0)));
        // 6L: the last Friday; 2024-05-31 is one, 2024-05-24 is not the last.
        assert!(cron("* * * ? * 6L").is_satisfied_by(at(2024, 5, 31, 0, 0, 0)));
        assert!(!cron("* * * ? * 6L").is_satisfied_by(at(2024, 5, 24, 0, 0, 0)));
        assert!(cron("* * * ? * FRIL").is_satisfied_by(at(2024, 5, 31, 0, 0, 0)));
        // 2#1: the first Monday; 2024-05-06 yes, 2024-05-13 no.
        assert!(cron("* * * ? * 2#1").is_satisfied_by(at(2024, 5, 6, 0, 0, 0)));
        assert!(!cron("* * * ? * 2#1").is_satisfied_by(at(2024, 5, 13, 0, 0, 0)));
        assert!(cron("* * * ? * MON#2").is_satisfied_by(at(2024, 5, 13, 0, 0, 0)));
    }

    #[test]
    fn years_and_extra_tokens() {
        let c = cron("0 0 0 1 1 ? 2025");
        assert!(c.is_satisfied_by(at(2025, 1, 1, 0, 0, 0)));
        assert!(!c.is_satisfied_by(at(2026, 1, 1, 0, 0, 0)));
        let c = cron("0 0 0 1 1 ? 2024-2026/2");
        assert!(c.is_satisfied_by(at(2026, 1, 1, 0, 0, 0)));
        assert!(!c.is_satisfied_by(at(2025, 1, 1, 0, 0, 0)));
        // Quartz ignores tokens after the year and accepts tabs and repeated spaces.
        assert!(cron("0\t0  0 1 1 ? 2025 whatever").is_satisfied_by(at(2025, 1, 1, 0, 0, 0)));
        assert!(!cron("* * * * * ? *").is_satisfied_by(at(3000, 1, 1, 0, 0, 0)));
    }

    #[test]
    fn steps_from_star_and_slash() {
        let c = cron("*/20 * * * * ?");
        for (s, want) in [(0, true), (20, true), (40, true), (10, false)] {
            assert_eq!(c.is_satisfied_by(at(2024, 1, 1, 0, 0, s)), want, "second {s}");
        }
        let c = cron("/20 * * * * ?");
        assert!(c.is_satisfied_by(at(2024, 1, 1, 0, 0, 40)));
        let c = cron("5/20 * * * * ?");
        assert!(c.is_satisfied_by(at(2024, 1, 1, 0, 0, 45)));
        assert!(!c.is_satisfied_by(at(2024, 1, 1, 0, 0, 40)));
    }

    #[test]
    fn invalid_cron_expressions_are_rejected() {
        for e in [
            "* * * * * *",           // neither day field is '?'
            "* * * ? * ?",           // both are
            "* * * ? *",             // too few fields
            "* * * ? * 8",           // day-of-week out of range
            "* * * ? * 0",           // day-of-week 0
            "60 * * ? * *",          // second out of range
            "* * 24 ? * *",          // hour out of range
            "* * * 32 * ?",          // day out of range
            "* * * 0 * ?",           // day 0
            "* * * ? 13 *",          // month out of range
            "* * * ? FOO *",         // bad month name
            "* * * ? * FUN",         // bad day name
            "* * MON ? * *",         // name in the wrong field
            "* * * ? * 2#6",         // nth out of range
            "* * * ? * 2#1,3#2",     // two nth
            "* * * L,5 * ?",         // L with other days
            "* * * ? * 5L,6",        // L with other days of week
            "*/60 * * ? * *",        // increment too large
            "* ? * * * *",           // ? in minutes
            "* * * 5L * ?",          // L after a day of month
            "* * * ? * 5W",          // W in day-of-week
            "* * * 5#2 * ?",         // # in day-of-month
            "* * * L-31 * ?",        // offset too large
            "* * * ? * 2-",          // dangling range
            "* * * ? * 2/",          // dangling step
            "* * * ? * 2/x",         // step is not a number
            "* * * ? * MO",          // short name
            "* * * ? * * 2030-2020", // reversed years
            "& * * ? * *",           // bad character
        ] {
            assert!(QuartzCron::parse(e).is_err(), "{e:?} should be rejected");
        }
    }

    #[test]
    fn a_huge_range_after_the_star_value_is_bounded_with_quartz_semantics() {
        // 99 is Quartz's `*` value, so `99-9946591` skips the range check and covers every day;
        // found by the `excluded_periods` fuzz target (10 s per parse before the loop was bounded).
        let store = |item: &str| {
            let mut c = QuartzCron::default();
            let chars: Vec<char> = item.chars().collect();
            c.store(&chars, Field::DayOfMonth).unwrap();
            c.set(Field::DayOfMonth).clone()
        };
        let started = std::time::Instant::now();
        let days = store("99-9946591");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!((1..=31).all(|d| days.contains(&d)));
        assert!(
            days.contains(&NO_SPEC) && days.contains(&ALL_SPEC),
            "98 and 99 are in the range, as in Quartz"
        );
        assert!(
            *days.last().unwrap() > ALL_SPEC,
            "the largest value stays above the special values"
        );
        // Stepping by 97 from 1: 1, 98, 195, ...; the bound keeps 1 and 98 and one value after.
        let stepped = store("99-1000/97");
        assert_eq!(stepped.iter().copied().collect::<Vec<_>>(), vec![1, 98, 195]);
        // The whole expression is then Quartz's error: `?` and a day-of-month holding NO_SPEC.
        let started = std::time::Instant::now();
        assert!(QuartzCron::parse("* * * 99-9946591 * ?").is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn quartz_leniencies_are_kept() {
        // Lower-case names, trailing junk after a complete item, `*5` meaning every value.
        assert!(cron("* * * ? * mon").is_satisfied_by(at(2024, 5, 6, 0, 0, 0)));
        assert!(cron("* * * ? * 5X").is_satisfied_by(at(2024, 5, 2, 0, 0, 0)));
        assert!(cron("*5 * * ? * *").is_satisfied_by(at(2024, 5, 2, 0, 0, 7)));
        // A step of 0 after a value is that single value.
        let c = cron("5/0 * * ? * *");
        assert!(c.is_satisfied_by(at(2024, 5, 2, 0, 0, 5)));
        assert!(!c.is_satisfied_by(at(2024, 5, 2, 0, 0, 6)));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn instant() -> impl Strategy<Value = DateTime<Utc>> {
            // 2000-01-01 .. 2100-01-01, millisecond resolution.
            (946_684_800_000i64..4_102_444_800_000i64).prop_map(|ms| DateTime::from_timestamp_millis(ms).unwrap())
        }

        proptest! {
            #[test]
            fn a_fixed_time_of_day_cron_matches_exactly_that_second(
                h in 0u32..24, m in 0u32..60, s in 0u32..60, now in instant()
            ) {
                let c = cron(&format!("{s} {m} {h} * * ?"));
                let expected = now.hour() == h && now.minute() == m && now.second() == s;
                prop_assert_eq!(c.is_satisfied_by(now), expected);
            }

            #[test]
            fn a_single_weekday_cron_matches_that_weekday_all_day(dow in 1u32..=7, now in instant()) {
                let c = cron(&format!("* * * ? * {dow}"));
                prop_assert_eq!(c.is_satisfied_by(now), now.weekday().number_from_sunday() == dow);
            }
        }
    }
}
